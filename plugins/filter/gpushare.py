"""The gpushare filters of the runbooks' shared steps (gpushare.gpu_sharing.<name>), each
documented in <name>.yml beside this file; their code: gpushare.plugins.filters."""

from gpushare.plugins.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
