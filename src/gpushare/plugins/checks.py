"""Every check `gpushare_wait` can poll, by name."""

from __future__ import annotations

from gpushare.rollout import checks as rollout
from gpushare.timeslicing import checks as timeslicing

CHECKS = {**timeslicing.CHECKS, **rollout.CHECKS}
