"""The runbooks' filters; they live in gpushare.plugins.filters."""

from gpushare.plugins.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
