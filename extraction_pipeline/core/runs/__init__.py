"""Run bookkeeping: grouping documents into runs, judging runs that are gone, worker liveness, interrupts."""
