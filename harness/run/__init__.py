"""Step 3, run: one kernel on one case (runner), all the cases of one kernel (suite), the backend it runs on, and the instruments around a run (out-of-bounds guard, compile clock)."""
