"""The change_record role's filters; they live in gpushare.change_record.filters."""

from gpushare.change_record.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
