"""The baseline filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their code:
gpushare.baseline.filters."""

from gpushare.baseline.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
