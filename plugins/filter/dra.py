"""The dra_pilot filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their
code: gpushare.dra.filters."""

from gpushare.dra.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
