"""How Numba compiles the SIMD vocabulary of ``simd.py`` (a reader may skip this file).

A Numba type for vectors (an LLVM vector such as ``<8 x float>``) and, for each helper of
``simd.py``, its typing and the few LLVM instructions a kernel's call of it compiles to.
``+``, ``-`` and ``*`` work on vectors, and on a vector with a scalar of the same dtype.
Needs llvmlite >= 0.45 (opaque pointers, ``.p0`` intrinsic names).
"""
import operator

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.typing.templates import AbstractTemplate, infer_global
from numba.extending import lower_builtin, models, overload, register_model

from .simd import (VECTOR_BYTES, exp_nonpositive, exp_nonpositive_f32, exp_nonpositive_f64, flat, hmax, hsum,
                   lanes, vbroadcast, vfloor, vfma, vload, vmax, vpow2, vsplat, vstore)


class VectorType(types.Type):
    def __init__(self, dtype):
        self.dtype = dtype
        self.lanes = VECTOR_BYTES * 8 // dtype.bitwidth
        super().__init__(name=f"Vector({dtype} x {self.lanes})")


@register_model(VectorType)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


_I32 = ir.IntType(32)


def _llvm_function(builder, name, return_type, argument_types):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(return_type, argument_types), name)


def _row_pointer(context, builder, row_type, row, start):
    data = context.make_array(row_type)(context, builder, row).data
    return builder.gep(data, [start], source_etype=context.get_data_type(row_type.dtype))


def _load_lanes(builder, pointer, count, fill):
    """The vector at ``pointer``, lanes at or past ``count`` from ``fill``: a whole vector is
    one plain load, a part one masked load (which reads nothing past ``count``)."""
    lane_count, element = fill.type.count, fill.type.element
    alignment = int(element.intrinsic_name[1:]) // 8  # "f32" -> 4 bytes
    with builder.if_else(_is_whole(builder, count, lane_count)) as (whole, part):
        with whole:
            plain = builder.load(builder.bitcast(pointer, fill.type.as_pointer()), align=alignment)
            whole_block = builder.block
        with part:
            mask = _lane_mask(builder, lane_count, count)
            load = _llvm_function(builder, f"llvm.masked.load.v{lane_count}{element.intrinsic_name}.p0",
                                  fill.type, [pointer.type, _I32, mask.type, fill.type])
            masked = builder.call(load, [pointer, ir.Constant(_I32, alignment), mask, fill])
            part_block = builder.block
    vector = builder.phi(fill.type)
    vector.add_incoming(plain, whole_block)
    vector.add_incoming(masked, part_block)
    return vector


def _store_lanes(builder, vector, pointer, count):
    """Write the first ``count`` lanes of ``vector`` at ``pointer``: a whole vector in one
    plain store, a part lane by lane (AMD Zen microcodes masked stores: 1.5-6x slower)."""
    lane_count, element = vector.type.count, vector.type.element
    alignment = int(element.intrinsic_name[1:]) // 8
    with builder.if_else(_is_whole(builder, count, lane_count)) as (whole, part):
        with whole:
            builder.store(vector, builder.bitcast(pointer, vector.type.as_pointer()), align=alignment)
        with part:  # unrolled: a loop here would be vectorised by LLVM through the stack
            for lane in range(lane_count - 1):
                with builder.if_then(builder.icmp_signed(">", count, count.type(lane))):
                    builder.store(builder.extract_element(vector, ir.Constant(_I32, lane)),
                                  builder.gep(pointer, [ir.Constant(_I32, lane)]), align=alignment)


def _is_whole(builder, count, lane_count):
    return builder.icmp_signed(">=", count, count.type(lane_count))


def _lane_mask(builder, lane_count, count):
    """<lane_count x i1>: lane i is on when i < count, for count < lane_count (a part vector)."""
    count = builder.select(builder.icmp_signed("<", count, count.type(0)), count.type(0), count)  # fits 32 bits
    lane_index = ir.Constant(ir.VectorType(_I32, lane_count), list(range(lane_count)))
    return builder.icmp_signed("<", lane_index, _splat_value(builder, builder.trunc(count, _I32), lane_count))


def _splat_value(builder, scalar, lane_count):
    vector_type = ir.VectorType(scalar.type, lane_count)
    vector = builder.insert_element(ir.Constant(vector_type, None), scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(_I32, lane_count), [0] * lane_count))


def _halving_reduction(builder, vector, combine):
    """Fold the upper half of the lanes onto the lower half until one lane is left."""
    width = vector.type.count
    while width > 1:
        half = width // 2
        low = builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(_I32, half), list(range(half))))
        high = builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(_I32, half), list(range(half, width))))
        vector, width = combine(low, high), half
    return builder.extract_element(vector, ir.Constant(_I32, 0))


def _select_max(builder):
    return lambda a, b: builder.select(builder.fcmp_ordered("<", a, b), b, a)


def _is_row(row):
    return (isinstance(row, types.Array) and row.ndim == 1 and row.layout == "C"
            and row.dtype in (types.float32, types.float64))


def _same_vectors(*args):
    return all(isinstance(a, VectorType) for a in args) and len({a.dtype for a in args}) == 1


def _compiles_to(helper, accepts, needs):
    """Teach Numba a call of the plain-Python ``helper``: the decorated function maps argument
    types to (signature, codegen), as an ``@intrinsic`` does, and the codegen emits its LLVM
    inside the calling kernel. Types ``accepts`` refuses: a TypingError naming ``needs``."""
    def register(typing):
        @infer_global(helper)
        class _HelperTemplate(AbstractTemplate):
            def generic(self, args, kws):
                if not accepts(*args):
                    raise TypingError(f"{helper.__name__} needs {needs}, got {', '.join(map(str, args))}")
                return typing(*args)[0]

        @lower_builtin(helper, types.VarArg(types.Any))
        def lower(context, builder, signature, args):
            return typing(*signature.args)[1](context, builder, signature, args)
        return typing
    return register


@overload(lanes)
def _lanes_numba(array):
    count = VECTOR_BYTES // (array.dtype.bitwidth // 8)
    return lambda array: count  # a compile-time constant


@_compiles_to(vload, lambda row, start, count, fill: _is_row(row) and fill == row.dtype,
              "a contiguous 1-D float32/float64 array and a fill of its dtype")
def _vload_ir(row, start, count, fill):
    vector_type = VectorType(row.dtype)

    def codegen(context, builder, signature, args):
        row_value, start_value, count_value, fill_value = args
        pointer = _row_pointer(context, builder, signature.args[0], row_value, start_value)
        return _load_lanes(builder, pointer, count_value, _splat_value(builder, fill_value, vector_type.lanes))
    return vector_type(row, types.intp, types.intp, row.dtype), codegen


@_compiles_to(vstore, lambda row, start, count, vector: _is_row(row) and vector == VectorType(row.dtype),
              "a contiguous 1-D float32/float64 array and a vector of its dtype")
def _vstore_ir(row, start, count, vector):
    def codegen(context, builder, signature, args):
        row_value, start_value, count_value, vector_value = args
        pointer = _row_pointer(context, builder, signature.args[0], row_value, start_value)
        _store_lanes(builder, vector_value, pointer, count_value)
        return context.get_dummy_value()
    return types.none(row, types.intp, types.intp, vector), codegen


@_compiles_to(vbroadcast, lambda row, index: _is_row(row), "a contiguous 1-D float32/float64 array")
def _vbroadcast_ir(row, index):
    vector_type = VectorType(row.dtype)

    def codegen(context, builder, signature, args):
        pointer = _row_pointer(context, builder, signature.args[0], args[0], args[1])
        return _splat_value(builder, builder.load(pointer), vector_type.lanes)
    return vector_type(row, types.intp), codegen


@_compiles_to(flat, lambda array: isinstance(array, types.Array) and array.layout == "C", "a C-contiguous array")
def _flat_ir(array):
    row_type = types.Array(array.dtype, 1, "C", readonly=not array.mutable)

    def codegen(context, builder, signature, args):
        source = context.make_array(signature.args[0])(context, builder, args[0])
        view = context.make_array(row_type)(context, builder)
        context.populate_array(view, data=source.data, shape=cgutils.pack_array(builder, [source.nitems]),
                               strides=cgutils.pack_array(builder, [source.itemsize]), itemsize=source.itemsize,
                               meminfo=None)  # borrowed: no reference counting
        return view._getvalue()
    return row_type(array), codegen


@_compiles_to(vsplat, lambda x: x in (types.float32, types.float64), "a float32 or float64 scalar")
def _vsplat_ir(x):
    def codegen(context, builder, signature, args):
        return _splat_value(builder, args[0], signature.return_type.lanes)
    return VectorType(x)(x), codegen


def _vector_function(builder, name, vector):  # LLVM's llvm.<name>.v8f32 (and so on) for this vector type
    name = f"llvm.{name}.v{vector.type.count}{vector.type.element.intrinsic_name}"
    return _llvm_function(builder, name, vector.type, [vector.type] * (3 if name.startswith("llvm.fmuladd") else 1))


def _pow2(builder, n):
    """2**n from the exponent bits; n is clipped first (NaN -> 0), so the float-to-int
    conversion is defined and stays one vector instruction."""
    float_type, lane_count = n.type, n.type.count
    mantissa_bits, bias = (23, 127) if float_type.element == ir.FloatType() else (52, 1023)
    int_type = ir.VectorType(ir.IntType(64 if bias == 1023 else 32), lane_count)
    x = builder.select(builder.fcmp_ordered("ord", n, n), n, ir.Constant(float_type, None))
    low, high = ir.Constant(float_type, [float(-bias)] * lane_count), ir.Constant(float_type, [float(bias)] * lane_count)
    x = builder.select(builder.fcmp_ordered("<", x, low), low, x)
    x = builder.select(builder.fcmp_ordered(">", x, high), high, x)
    biased = builder.add(builder.fptosi(x, int_type), ir.Constant(int_type, [bias] * lane_count))
    return builder.bitcast(builder.shl(biased, ir.Constant(int_type, [mantissa_bits] * lane_count)), float_type)


def _lanewise(helper, emit, needs, reduces=False):
    """Compile ``helper(vector, ...)`` (vectors of one dtype) to ``emit(builder, *llvm values)``;
    it returns a vector of the same type, or with ``reduces`` one lane's scalar."""
    @_compiles_to(helper, _same_vectors, needs)
    def typing(*vectors):
        def codegen(context, builder, signature, args):
            return emit(builder, *args)
        return (vectors[0].dtype if reduces else vectors[0])(*vectors), codegen


_lanewise(vfma, lambda b, acc, x, y: b.call(_vector_function(b, "fmuladd", acc), [x, y, acc]), "three vectors of one dtype")
_lanewise(vmax, lambda b, x, y: _select_max(b)(x, y), "two vectors of one dtype")
_lanewise(vfloor, lambda b, x: b.call(_vector_function(b, "floor", x), [x]), "a vector")
_lanewise(vpow2, _pow2, "a vector")
_lanewise(hsum, lambda b, x: _halving_reduction(b, x, b.fadd), "a vector", reduces=True)
_lanewise(hmax, lambda b, x: _halving_reduction(b, x, _select_max(b)), "a vector", reduces=True)


def _install_vector_operator(operator_function, emit):
    """``+``, ``-``, ``*`` on vectors, and on a vector and a scalar of its dtype (no upcast)."""
    @infer_global(operator_function)
    class _VectorOperator(AbstractTemplate):
        def generic(self, args, kws):
            vector = next((x for x in args if isinstance(x, VectorType)), None)
            if vector is not None and len(args) == 2 and all(x in (vector, vector.dtype) for x in args):
                return vector(*args)

    def lower(context, builder, signature, args):
        lanes_ = signature.return_type.lanes
        a, b = (_splat_value(builder, x, lanes_) if t == signature.return_type.dtype else x
                for x, t in zip(args, signature.args))
        return emit(builder)(a, b)
    for types_ in ((VectorType, VectorType), (VectorType, types.Float), (types.Float, VectorType)):
        lower_builtin(operator_function, *types_)(lower)


_install_vector_operator(operator.add, lambda builder: builder.fadd)
_install_vector_operator(operator.sub, lambda builder: builder.fsub)
_install_vector_operator(operator.mul, lambda builder: builder.fmul)


@overload(exp_nonpositive)
def _exp_nonpositive_numba(t):
    if isinstance(t, VectorType):
        return exp_nonpositive_f32 if t.dtype == types.float32 else exp_nonpositive_f64
