"""The mig role's filters; they live in gpushare.mig.filters."""

from gpushare.mig.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
