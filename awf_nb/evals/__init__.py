"""Evaluations: run one workflow over a dataset of cases, score every run, repeat, compare.

An eval with `variants:` runs several versions of the workflow on the same cases, epochs
and seeds, and compares them case by case.

An eval file (`*.eval.yaml`) names a workflow, a dataset (one case per row), how a case
becomes the workflow's inputs and its simulated user, the scorers, and how many times each
case runs (`epochs`). Each (case, epoch) is an ordinary run in the store; the eval keeps
its own folder (`evals/EVAL_ID/`) with the rows as they finish, so it can be resumed after
a crash and listed and compared later.

The modules, in the order data flows:

    model.py      the eval file (pydantic)          loader.py    YAML -> EvalSpec, checked
    datasets.py   rows -> cases                     run_setup.py the one way a run starts
    executor.py   the seam: who runs the work       scorers.py   condition, judge, command
    driver.py     plan, execute, write the rows     results.py   rows, summary, pass^k
    storage.py    the eval's folder                 api.py       the Python entry points
    variants.py   `variants:`: versions compared    compare.py   the paired comparison
    pairwise.py   the judge of two variants' conversations of a case, in both orders
    report/       a stored eval as HTML, Markdown, JUnit XML or an Inspect AI log (one
                  loader, `report/load.py`, for every format)
    ray_executor.py  `--executor ray`: the work on a Ray cluster's workers (Ray imported
                  only there, only when asked for)

This package imports the engine, the store, the workflow language and secrets; providers
and the cassette package only through `run_setup.py`; never a frontend (they render it).
"""
