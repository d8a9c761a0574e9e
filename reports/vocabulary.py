"""The report's vocabulary: verdicts, causes and headline buckets with their labels and meanings, and how one row
or one figure falls into them (``bucket_of``, ``rank_band``, ``change_between``, ``recompile_bin``).
"""

from __future__ import annotations

import pandas as pd

from compat_matrix.schema import OK_VERDICTS as OK_VERDICT_ENUMS
from compat_matrix.schema import Cause, Verdict

# The schema's verdicts (the overall one and each stage's), in display order, and what each means.
VERDICTS = tuple(verdict.value for verdict in Verdict)
VERDICT_MEANINGS = {verdict.value: verdict.meaning for verdict in Verdict}
OK_VERDICTS = frozenset(verdict.value for verdict in OK_VERDICT_ENUMS)
NOT_MEASURED_VERDICTS = frozenset({Verdict.NOT_MEASURED, Verdict.HARNESS_ERROR, Verdict.TIMEOUT})
# Headline buckets follow the harness's causes: a failure is the device's or Transformers' own; rows the
# harness could not measure say nothing about the architecture, and are split by why (the simulator's own
# graph execution, a tiny model the harness could not build, anything else: a time limit, a listed
# architecture without a row). Rows of the older schema carry no cause, so their failures are counted apart
# rather than blamed on either.
BUCKETS = (
    "works",
    "works-eager",
    "works-with-caveats",
    "fails-device",
    "fails-transformers",
    "fails-unattributed",
    "not-measured-simulator",
    "not-measured-harness",
    "not-measured",
)
BUCKET_LABELS = {
    "works": "works (compiled)",
    "works-eager": "works (eager generation)",
    "works-with-caveats": "works with caveats",
    "fails-device": "fails on device",
    "fails-transformers": "fails: Transformers bug",
    "fails-unattributed": "fails, cause not recorded",
    "not-measured-simulator": "not measured: simulator",
    "not-measured-harness": "not measured: harness error",
    "not-measured": "not measured: time limit or no row",
}
NOT_MEASURED_BUCKETS = ("not-measured-simulator", "not-measured-harness", "not-measured")
# Shown only where a run has some: they exist only in older rows, timeouts, or rows missing from a run.
OPTIONAL_BUCKETS = ("fails-unattributed", "not-measured")
OK_BUCKETS = ("works", "works-eager", "works-with-caveats")
CAUSE_LABELS = {
    "device": "device",
    "transformers": "Transformers",
    "simulator": "simulator",
    "harness": "harness",
}
CAUSE_MEANINGS = {cause.value: cause.meaning for cause in Cause}
CONFIG_LABELS = {
    "checkpoint": "checkpoint configs",
    "class-defaults": "class-default configs",
}
RANK_BANDS = (("1-10", 1, 10), ("11-25", 11, 25), ("26-50", 26, 50), ("51-100", 51, 100))
UNRANKED_BAND = "unranked"
NOT_RUN = "no row"
RECOMPILE_BINS = ((0, 0, "0"), (1, 1, "1"), (2, 2, "2"), (3, 5, "3-5"), (6, 10, "6-10"), (11, None, ">10"))


def bucket_of(verdict: str, cause: str | None) -> str:
    """The headline bucket of one row."""
    if verdict in OK_BUCKETS:
        return verdict
    if cause == Cause.SIMULATOR:
        return "not-measured-simulator"
    if cause == Cause.HARNESS or verdict == Verdict.HARNESS_ERROR:
        return "not-measured-harness"
    if verdict in NOT_MEASURED_VERDICTS:
        return "not-measured"
    if cause == Cause.TRANSFORMERS:
        return "fails-transformers"
    if cause == Cause.DEVICE:
        return "fails-device"
    return "fails-unattributed"


def rank_band(rank) -> str:
    if rank is None or pd.isna(rank):
        return UNRANKED_BAND
    for name, low, high in RANK_BANDS:
        if low <= int(rank) <= high:
            return name
    return UNRANKED_BAND


def change_between(before: str | None, after: str | None) -> str:
    """How an architecture's verdict moved from the baseline run to a later one."""
    if before is None and after is None:
        return ""
    if before is None:
        return "new"
    if after is None:
        return "missing"
    if before == after:
        return "same"
    if before not in OK_VERDICTS and before not in NOT_MEASURED_VERDICTS and after in OK_VERDICTS:
        return "fixed"
    if before in OK_VERDICTS and after not in OK_VERDICTS and after not in NOT_MEASURED_VERDICTS:
        return "regressed"
    return "changed"


def recompile_bin(count: int) -> str:
    return next(
        label for low, high, label in RECOMPILE_BINS if count >= low and (high is None or count <= high)
    )
