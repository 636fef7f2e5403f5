"""The time-slicing enable filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside
this file; their code: gpushare.timeslicing.filters."""

from gpushare.timeslicing.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
