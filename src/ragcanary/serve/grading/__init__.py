"""Judgments for documents nobody labelled (docs/judgments.md).

After a run is stored, the unlabelled ids that entered a labelled canary's top-k
(``wanted.py``) are queued for the suite's judge and graded in the background
(``worker.py``): a run never waits for a judge, and a judge that fails is counted and
logged, never failing a run. A person reviews what it proposed (``review.py``): an accepted
grade is written into the suite file, so it counts in the next run's verdict.
"""
