"""The baseline before sharing: a week of DCGM data per physical GPU (or MIG instance), turned into
a verdict - candidate, not-candidate or insufficient-data - with reasons and a replica count."""
