"""What hidden checks are written with: the ``ex`` fixture's type, failures, and the toolkit.

A hidden check is a function ``check_<id>(ex)`` in ``grader/hidden/<exercise>/checks.py``;
its docstring's first line says what it tries, in words safe to show a candidate. It calls
the candidate through ``ex.candidate`` (a proxy to the child process), compares with its own
oracle (shared attention oracles live in ``grader/hidden/_oracles.py``), and fails with
:func:`fail`, giving what was tried (``case``), for masks and grids a picture, and the kind of
failure (what it costs). The toolkit, so a new exercise's checks are a short list of
``check_*`` functions:

- sizes: :func:`odd_size` (numpy's half-open range, never a power of two), :func:`chunk_sizes`;
- values: :func:`expect_array`, :func:`expect_raises`, :func:`describe`;
- sizes past int64: :func:`past_int64` (asked, and a failure there is hygiene);
- invalid arguments: :func:`expect_rejected` (ValueError, or the exercise's diagnosis is named),
  :func:`misfit_calls` (shapes numpy would broadcast, one argument at a time);
- precision: :func:`close` / :func:`off_by` (section 1's rule, constant :data:`PRECISION`);
- section 1's values and containers: :func:`garbage`, :func:`offset_scores`; :func:`expect_array`
  and :func:`received` take the right values in a list or another dtype as a slip of the running
  check (:func:`note_slip`: hygiene, and the values are still judged);
- evidence: :func:`measure`, the one place memory and warnings are taken (:func:`middle_reading` for a
  must-not: most of three readings on fresh shapes decide); :func:`cpu_of`,
  :class:`ChildCpu` and :func:`child_cpu_seconds`, the child's CPU time as the kernel counts it;
- diagnoses: a list of :class:`Variant` per function, :func:`explain` over every failing case
  (:func:`fits` for one case),
  :func:`name_mistakes` to record them and say so in the message;
- pictures: :func:`grid_picture` (``keep_corner`` for decode masks).

The toolkit lives in one module per concern: ``run`` (the fixture, failures, slips), ``values``
(containers, precision), ``rejections``, ``drawn`` (sizes, extreme values), ``evidence`` (memory,
warnings, CPU), ``diagnosis`` and ``pictures``; checks import it all from here.
"""
from __future__ import annotations

from ..result import plural  # noqa: F401  (plural: the one way checks count things)
from .diagnosis import Explanation, Miss, Variant, explain, explain_fits, fits, name_mistakes, settle  # noqa: F401
from .drawn import GARBAGE_MAGNITUDE, chunk_sizes, edge_windows, garbage, odd_size, odd_size_closed, offset_scores  # noqa: F401
from .evidence import ChildCpu, child_cpu_seconds, cpu_of, measure, middle_reading  # noqa: F401
from .pictures import PICTURE_MAX, grid_picture  # noqa: F401
from .rejections import (  # noqa: F401
    SHOWN,
    WRONG_REJECTIONS,
    all_refused,
    allowing_empty,
    expect_raises,
    expect_rejected,
    in_usual_types,
    misfit_calls,
    other_argument_types,
    past_int64,
    rejects_argument_type,
)
from .run import CheckFailure, ExerciseRun, fail, note_slip, settle_slips, slips_of  # noqa: F401
from .values import (  # noqa: F401
    PRECISION,
    as_array,
    close,
    close_rows,
    container_slip,
    describe,
    error_of,
    expect_array,
    input_eps,
    off_by,
    received,
    same_bytes,
    summarize,
    tolerance,
)
