"""Function transforms with ``torch.func``'s names and signatures.

    from minigrad import func
    func.grad(f)(x)                       # df/dx for a one-element f
    out, vjp_fn = func.vjp(f, x)          # vjp_fn(v) -> (v^T J,)
    out, jvp_out = func.jvp(f, (x,), (t,))  # J t, by forward mode
    func.jacrev(f)(x), func.jacfwd(f)(x)  # the full Jacobian, by rows / by columns
    func.hessian(f)(x)                    # jacfwd(jacrev(f))

They compose (``grad(grad(f))``, ``jacfwd(jacrev(f))``) because each is built
on the engine's differentiable pieces: reverse mode on ``autograd.grad(...,
create_graph=True)``, forward mode on ``forward_ad`` levels. Arguments are
Tensors; ``f`` returns a Tensor. The results stay connected to anything
outside ``f``'s arguments that requires grad (e.g. a model's weights, for a
gradient penalty), and are plain tensors otherwise.

``jacrev`` costs one backward pass per output element and ``jacfwd`` one
forward pass per input element: reverse mode wins for wide functions
(R^n -> R), forward mode for tall ones (R -> R^n).
"""
import numpy as np

from . import autograd, forward_ad
from .grad_mode import enable_grad
from .ops import stack
from .tensor import Tensor, as_tensor


def vjp(f, *primals, has_aux=False):
    """``(f(*primals), vjp_fn)``; ``vjp_fn(v)`` gives a tuple with v^T (df/dprimal) per primal."""
    with enable_grad():
        tracked = [_tracked(p) for p in primals]
        out, aux = _split_aux(f(*tracked), has_aux, "vjp")
    if out.dtype.kind != "f":
        raise TypeError(f"vjp: f must return a floating-point Tensor, got dtype {out.dtype}; an integer or "
                        "bool result has no derivative (cast it with .astype(np.float64) if you mean one)")

    def vjp_fn(cotangent):
        grads = _derivatives(out, tracked, as_tensor(cotangent), retain_graph=True)
        return tuple(_result(g, tracked) for g in grads)

    result = _result(out, tracked)
    return (result, vjp_fn, _map_tensors(lambda t: _result(t, tracked), aux)) if has_aux else (result, vjp_fn)


def grad(f, argnums=0, has_aux=False):
    """The function computing the gradient of a one-element ``f`` w.r.t. argument(s) ``argnums``."""
    def gradient(*args):
        nums = _argnums(argnums, len(args))
        with enable_grad():
            args = list(args)
            for i in nums:
                args[i] = _tracked(args[i])
            out, aux = _split_aux(f(*args), has_aux, "grad")
            if out.size != 1:
                raise RuntimeError(f"grad: f must return a one-element tensor, got shape {out.shape}; "
                                   "use jacrev for a Jacobian or vjp for a vector-Jacobian product")
            tracked = [args[i] for i in nums]
            grads = _derivatives(out, tracked)
        grads = tuple(_result(g, tracked) for g in grads)
        result = grads[0] if isinstance(argnums, int) else grads
        return (result, _map_tensors(lambda t: _result(t, tracked), aux)) if has_aux else result
    return gradient


def jvp(f, primals, tangents, has_aux=False):
    """``(f(*primals), J t)``: one forward pass carrying ``tangents`` (forward mode)."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents; give one tangent per primal")
    with forward_ad.dual_level():
        duals = [forward_ad.make_dual(as_tensor(p), as_tensor(t)) for p, t in zip(primals, tangents)]
        out, aux = _split_aux(f(*duals), has_aux, "jvp")
        primal_out, tangent_out = forward_ad.unpack_dual(out)
        aux = _map_tensors(lambda t: forward_ad.unpack_dual(t).primal, aux)
    if tangent_out is None:
        tangent_out = _zeros_if_none(None, primal_out)
    return (primal_out, tangent_out, aux) if has_aux else (primal_out, tangent_out)


def jacrev(f, argnums=0, has_aux=False):
    """The Jacobian, one reverse pass per output element: shape ``out.shape + arg.shape``.

    With ``has_aux=True`` f returns ``(output, aux)`` and the result is ``(jacobian, aux)``,
    aux not differentiated (as ``torch.func.jacrev``)."""
    def jacobian(*args):
        nums = _argnums(argnums, len(args))
        args = list(args)

        def of_selected(*selected):
            for i, x in zip(nums, selected):
                args[i] = x
            return f(*args)
        out, vjp_fn, *aux = vjp(of_selected, *[args[i] for i in nums], has_aux=has_aux)
        eye = np.eye(out.size, dtype=out.dtype)
        rows = [vjp_fn(Tensor._from_op(eye[k].reshape(out.shape), None)) for k in range(out.size)]
        jacobians = tuple(stack([row[j] for row in rows]).reshape(out.shape + as_tensor(args[i]).shape)
                          for j, i in enumerate(nums))
        result = jacobians[0] if isinstance(argnums, int) else jacobians
        return (result, aux[0]) if has_aux else result
    return jacobian


def jacfwd(f, argnums=0, has_aux=False):
    """The Jacobian, one forward-mode pass per input element: shape ``out.shape + arg.shape``.

    With ``has_aux=True`` f returns ``(output, aux)`` and the result is ``(jacobian, aux)``,
    aux without tangents (as ``torch.func.jacfwd``)."""
    def jacobian(*args):
        nums = _argnums(argnums, len(args))
        jacobians, aux = [], None
        for i in nums:
            x = as_tensor(args[i])
            eye = np.eye(x.size, dtype=x.dtype)
            columns = []
            for k in range(x.size):
                with forward_ad.dual_level():
                    dual_args = list(args)
                    dual_args[i] = forward_ad.make_dual(x, Tensor._from_op(eye[k].reshape(x.shape), None))
                    out, aux = _split_aux(f(*dual_args), has_aux, "jacfwd")
                    out, column = forward_ad.unpack_dual(out)
                    aux = _map_tensors(lambda t: forward_ad.unpack_dual(t).primal, aux)
                columns.append(_zeros_if_none(column, out))
            jacobians.append(stack(columns, axis=-1).reshape(out.shape + x.shape))
        result = jacobians[0] if isinstance(argnums, int) else tuple(jacobians)
        return (result, aux) if has_aux else result
    return jacobian


def hessian(f, argnums=0):
    """The Hessian of a one-element ``f``: ``jacfwd(jacrev(f))``, as in ``torch.func``."""
    return jacfwd(jacrev(f, argnums), argnums)


def _derivatives(out, inputs, cotangent=None, retain_graph=None):
    """The gradients of ``out`` w.r.t. ``inputs`` (create_graph), zeros for those it does not use.

    As ``torch.func``: an output that does not require grad has zero derivatives, not an
    error. That is the derivative of a derivative that is constant wherever it exists (the
    gradient of ``relu(x).sum()`` is a 0/1 mask: ``jacrev(grad(f))`` is zeros, as ``hessian``),
    or of an output computed without the inputs. ``autograd.grad`` itself still raises there."""
    if not out.requires_grad:
        return tuple(_zeros_if_none(None, x) for x in inputs)
    with enable_grad():
        grads = autograd.grad(out, inputs, cotangent, retain_graph=retain_graph, create_graph=True,
                              allow_unused=True)
    return tuple(_zeros_if_none(g, x) for g, x in zip(grads, inputs))


def _tracked(x):
    """An alias of ``x`` that requires grad: connected to ``x``'s graph and tangents when it has them."""
    x = as_tensor(x)
    if x.dtype.kind != "f":
        raise TypeError(f"minigrad.func: can only differentiate floating-point tensors, got dtype {x.dtype}")
    alias = x.reshape(x.shape)       # an identity op: keeps x's reverse graph and forward tangents
    alias.requires_grad = True
    return alias


def _result(t, tracked):
    """``t`` cut off from the graph if it depends on nothing but this transform's own aliases
    (forward tangents kept); otherwise left as it is, so an outer backward reaches it."""
    if not t.requires_grad or _depends_on_more_than(t, tracked):
        return t
    plain = Tensor._from_op(t.data, None)
    tangents = getattr(t, "_tangents", None)
    if tangents:
        plain._tangents = {level: _result(tangent, tracked) for level, tangent in tangents.items()}
    return plain


def _depends_on_more_than(t, tracked) -> bool:
    """Whether a leaf that requires grad, other than the aliases in ``tracked``, lies below ``t``."""
    own = {id(x) for x in tracked}
    seen, todo = set(), [t]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.grad_fn is None:
            if x.requires_grad and id(x) not in own:
                return True
            continue
        if id(x) in own:
            return True     # an alias of an argument that is itself in a graph
        todo.extend(i for i in x.grad_fn.inputs if i.requires_grad)
    return False


def _zeros_if_none(g, like):
    return Tensor._from_op(np.zeros_like(like.data), None) if g is None else g    # not like * 0: inf * 0 is NaN


def _split_aux(result, has_aux, name):
    if not has_aux:
        if not isinstance(result, Tensor):
            raise TypeError(f"{name}: f must return a Tensor, got {type(result).__name__}")
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], Tensor)):
        raise TypeError(f"{name}(has_aux=True): f must return a pair (Tensor, aux)")
    return result


def _map_tensors(fn, aux):
    """``aux`` with ``fn`` applied to each Tensor in it (itself, or in a tuple, list or dict)."""
    if isinstance(aux, Tensor):
        return fn(aux)
    if isinstance(aux, (tuple, list)):
        return type(aux)(_map_tensors(fn, a) for a in aux)
    if isinstance(aux, dict):
        return {k: _map_tensors(fn, a) for k, a in aux.items()}
    return aux


def _argnums(argnums, count):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not isinstance(i, int) or not -count <= i < count:
            raise ValueError(f"argnums {argnums} is out of range for a function called with {count} argument(s)")
    return tuple(i % count for i in nums)
