"""Known wrong: partial_attention keeps m as the max of the unscaled scores q k^T and scales only inside
exp, so l and o are right relative to that m but m + log(l) is not the log-sum-exp of the scaled scores,
and chunks merge wrong. One chunk finalises right. At large logits its lse looks like missing_scale's;
elsewhere it does not, so no mistake is named (a blind tester's answer, round 15).
"""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # missing_scale fits only its large-logit cases
EXPECTED_LEVEL = "weak"


def _float_dtype(*arrays):
    """float32 when every float input is float32, else float64."""
    dt = np.result_type(*arrays)
    return np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)


def _as_mask(mask, shape, name="mask"):
    mask = np.asarray(mask)
    if mask.shape != shape:
        raise ValueError(f"{name} has shape {mask.shape}, expected {shape}")
    if mask.dtype != bool:
        if mask.dtype.kind not in "iu":
            raise ValueError(f"{name} must be a bool array, got dtype {mask.dtype}")
        mask = mask != 0
    return mask


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores)
    if scores.ndim < 1:
        raise ValueError("scores must have at least one axis [..., S]")
    mask = _as_mask(mask, scores.shape)
    dt = _float_dtype(scores)
    s = scores.astype(dt, copy=False)
    # row max over the allowed entries only; -inf for a row with nothing allowed (or S = 0)
    m = np.max(np.where(mask, s, -np.inf), axis=-1, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(dt)
    # masked entries are replaced by the shift before subtracting: never touch their values
    with np.errstate(over="ignore"):  # allowed scores far apart (1e308 - -1e308) -> -inf -> 0
        d = np.where(mask, s, m) - m
    e = np.where(mask, np.exp(np.where(mask, d, 0)), 0).astype(dt)
    den = e.sum(axis=-1, keepdims=True)
    den = np.where(den > 0, den, 1).astype(dt)
    return (e / den).astype(dt, copy=False)


def _check_2d(x, name):
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {x.shape}")
    return x


def partial_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray):
    q, k, v = _check_2d(q, "q"), _check_2d(k, "k"), _check_2d(v, "v")
    T, D = q.shape
    n = k.shape[0]
    if D < 1:
        raise ValueError("head dimension D must be at least 1")
    if k.shape[1] != D:
        raise ValueError(f"k has width {k.shape[1]}, q has width {D}")
    if v.shape != (n, D):
        raise ValueError(f"v has shape {v.shape}, expected {(n, D)}")
    mask = _as_mask(mask, (T, n))
    dt = _float_dtype(q, k, v)
    q, k, v = (a.astype(dt, copy=False) for a in (q, k, v))
    # keys/values that no query may see can hold anything (1e30): never multiply them in
    seen = mask.any(axis=0)
    if not seen.all():
        k = np.where(seen[:, None], k, 0).astype(dt)
        v = np.where(seen[:, None], v, 0).astype(dt)
    scale = dt.type(1.0 / np.sqrt(D))
    raw = q @ k.T
    # max of the raw scores: scaling by a positive constant does not change where the max is
    m = np.max(np.where(mask, raw, -np.inf), axis=1, initial=-np.inf).astype(dt)
    shift = np.where(np.isfinite(m), m, 0).astype(dt)
    d = (np.where(mask, raw, shift[:, None]) - shift[:, None]) * scale
    p = np.where(mask, np.exp(d), 0).astype(dt)
    l = p.sum(axis=1).astype(dt)
    o = (p @ v).astype(dt)
    return m, l, o


def _check_state(state, name):
    try:
        m, l, o = state
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a tuple (m, l, o)") from None
    m, l, o = np.asarray(m), np.asarray(l), np.asarray(o)
    if m.ndim != 1 or l.shape != m.shape or o.ndim != 2 or o.shape[0] != m.shape[0]:
        raise ValueError(f"{name} must be (m [T], l [T], o [T, D]), got shapes "
                         f"{m.shape}, {l.shape}, {o.shape}")
    return m, l, o


def merge_partials(a, b):
    ma, la, oa = _check_state(a, "a")
    mb, lb, ob = _check_state(b, "b")
    if ma.shape != mb.shape or oa.shape != ob.shape:
        raise ValueError(f"states do not fit: o shapes {oa.shape} and {ob.shape}")
    dt = _float_dtype(ma, la, oa, mb, lb, ob)
    ma, la, oa, mb, lb, ob = (x.astype(dt, copy=False) for x in (ma, la, oa, mb, lb, ob))
    m = np.maximum(ma, mb)
    shift = np.where(np.isfinite(m), m, 0).astype(dt)
    # a side that saw nothing has m = -inf: exp(-inf - finite) = 0, no inf - inf anywhere
    wa = np.where(np.isfinite(ma), np.exp(np.where(np.isfinite(ma), ma, 0) - shift), 0).astype(dt)
    wb = np.where(np.isfinite(mb), np.exp(np.where(np.isfinite(mb), mb, 0) - shift), 0).astype(dt)
    l = (la * wa + lb * wb).astype(dt)
    o = (oa * wa[:, None] + ob * wb[:, None]).astype(dt)
    return m.astype(dt), l, o


def finalize(state) -> np.ndarray:
    m, l, o = _check_state(state, "state")
    dt = _float_dtype(m, l, o)
    ok = l > 0
    den = np.where(ok, l, 1).astype(dt)
    return np.where(ok[:, None], o / den[:, None], 0).astype(dt)
