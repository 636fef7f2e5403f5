"""Queue backfill with Kueue: the team/pool description, the Kueue objects it renders, queue status."""
