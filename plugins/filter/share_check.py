"""The share_check filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their
code: gpushare.share_check.filters."""

from gpushare.share_check.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
