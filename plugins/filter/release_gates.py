"""The release_gates filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their
code: gpushare.release_gates.filters."""

from gpushare.release_gates.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
