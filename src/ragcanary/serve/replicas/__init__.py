"""Replicas of `ragcanary serve` on one PostgreSQL database: each scheduled tick runs once.

Every replica names a job's ticks alike: the points of a grid hashed from the job's name
(``grid_offset_s``), whatever moment of each grid interval it fires the job at (``tick_of``).
Replicas with one config fire each job at the same moment, its phase, and the phases of all
jobs lie evenly over their interval (``serve.schedule.jobs.grid_phases``).

Before running a tick a replica claims it: a row keyed by (job, tick) that only one INSERT
can create (``Store.claim``), whichever replicas try and in whatever order. That key alone
makes a tick run at most once; nothing else has to be right for that.

Who tries first only decides who usually wins. Replicas write a heartbeat row every few
seconds; those seen lately are alive. Each job has a preference order over the live
replicas: the jobs, sorted, are dealt round-robin to the replicas, sorted, and the others
follow in turn. The first replica in the order claims at the tick; the n-th waits n turns
(``takeover_s``) first. So the work is spread evenly while all are alive, and when the first
is dead, cut off from the database or late, the next claims the tick a turn later: failover
takes a turn, not a heartbeat timeout. A replica that cannot reach the database cannot claim
and runs nothing (it could not store the run); its runs finished before the cut are written,
once, when it reconnects. A replica killed in the middle of a run loses that one tick.
"""
