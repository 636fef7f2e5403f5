"""The change_record filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their
code: gpushare.change_record.filters."""

from gpushare.change_record.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
