"""An independent quantizer and packer for AWQ (GEMM), GPTQ and compressed-tensors FP8 checkpoints.

Written from the formats' descriptions (AutoAWQ's WQLinear_GEMM packing, AutoGPTQ's QuantLinear
packing, compressed-tensors' float-quantized layout, the OCP FP8 E4M3 definition), sharing no code
with the C++ runtime: the test checks that pkv-make-model writes the same bytes and that the C++
reader dequantizes what this file packs to the values this file computes.

Python 3 standard library only. Arithmetic follows worker/tools/quantize.h: every step is one
float32 operation (emulated here by rounding a double result to float32, which is exact for one
+, -, *, / of float32 operands), round() is round-half-to-even like std::nearbyint.
"""

import bisect
import json
import math
import struct

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of an AWQ word holds output column 8c + ORDER[i]
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


# ---- scalar formats -----------------------------------------------------------------------------

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u += 0x7FFF + ((u >> 16) & 1)  # round to nearest even
    return (u >> 16) & 0xFFFF


def bf16(x):
    return struct.unpack("<f", struct.pack("<I", bf16_bits(x) << 16))[0]


def round_to(dtype, x):
    return {"F32": f32, "F16": f16, "BF16": bf16}[dtype](x)


def encode(dtype, values):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    if dtype == "BF16":
        return struct.pack("<%dH" % len(values), *[bf16_bits(v) for v in values])
    if dtype == "I32":
        return struct.pack("<%dI" % len(values), *[v & 0xFFFFFFFF for v in values])
    if dtype == "F8_E4M3":
        return bytes(values)
    raise ValueError(dtype)


def decode(dtype, data):
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(data) // 4), data))
    if dtype == "F16":
        return list(struct.unpack("<%de" % (len(data) // 2), data))
    if dtype == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for h in struct.unpack("<%dH" % (len(data) // 2), data)]
    if dtype == "I32":
        return list(struct.unpack("<%dI" % (len(data) // 4), data))
    if dtype == "F8_E4M3":
        return list(data)
    raise ValueError(dtype)


def e4m3_value(code):
    """float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; 0x7f/0xff are NaN."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 0x7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return sign * m / 8.0 * 2.0 ** -6
    return sign * (1.0 + m / 8.0) * 2.0 ** (e - 7)


E4M3_POSITIVE = [e4m3_value(c) for c in range(0x7F)]  # codes 0x00..0x7e, increasing


def e4m3_encode(x):
    """Nearest code, ties to the even code, saturating at 448."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    if a >= E4M3_POSITIVE[-1]:
        return sign | 0x7E
    hi = bisect.bisect_left(E4M3_POSITIVE, a)
    if E4M3_POSITIVE[hi] == a:
        return sign | hi
    lo = hi - 1
    dlo, dhi = a - E4M3_POSITIVE[lo], E4M3_POSITIVE[hi] - a
    code = lo if dlo < dhi or (dlo == dhi and lo % 2 == 0) else hi
    return sign | code


# ---- quantizers: w is a list of rows (n rows of k floats) ---------------------------------------

def _int4_groups(w, group, params):
    """-> q [n][k], zero [n][k/group], scale [n][k/group] with params(lo, hi) -> (scale, zero)."""
    q, zero, scale = [], [], []
    for row in w:
        qr, zr, sr = [], [], []
        for j0 in range(0, len(row), group):
            vals = row[j0:j0 + group]
            s, z = params(min(vals), max(vals))
            qr += [min(15, max(0, round(f32(v / s)) + z)) for v in vals]
            zr.append(z)
            sr.append(s)
        q.append(qr)
        zero.append(zr)
        scale.append(sr)
    return q, zero, scale


def quantize_awq(w, group):
    def params(lo, hi):
        s = f16(f32(max(f32(hi - lo), f32(1e-5)) / 15.0))
        return s, min(15, max(0, -round(f32(lo / s))))
    return _int4_groups(w, group, params)


def quantize_gptq(w, group, sym):
    def params(lo, hi):
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        if sym:
            hi = max(-lo, hi)
            if lo < 0:
                lo = -hi
        if lo == 0 and hi == 0:
            lo, hi = -1.0, 1.0
        s = f16(f32(f32(hi - lo) / 15.0))
        return s, 8 if sym else min(15, max(0, round(f32(-lo / s))))
    return _int4_groups(w, group, params)


def quantize_fp8(w, per_tensor, scale_dtype):
    def scale_of(rows):
        amax = max(abs(v) for r in rows for v in r)
        return round_to(scale_dtype, 1.0 if amax == 0 else f32(amax / 448.0))
    scales = [scale_of(w)] if per_tensor else [scale_of([r]) for r in w]
    q = [[e4m3_encode(f32(v / scales[0 if per_tensor else i])) for v in r] for i, r in enumerate(w)]
    return q, scales


# ---- packers ------------------------------------------------------------------------------------

def pack_awq(q, zero, scale):
    n, k, groups = len(q), len(q[0]), len(zero[0])
    qweight = [sum(q[8 * c + AWQ_ORDER[i]][j] << (4 * i) for i in range(8))
               for j in range(k) for c in range(n // 8)]
    qzeros = [sum(zero[8 * c + AWQ_ORDER[i]][g] << (4 * i) for i in range(8))
              for g in range(groups) for c in range(n // 8)]
    scales = [scale[r][g] for g in range(groups) for r in range(n)]
    return {"qweight": ("I32", [k, n // 8], qweight), "qzeros": ("I32", [groups, n // 8], qzeros),
            "scales": ("F16", [groups, n], scales)}


def pack_gptq(q, zero, scale, group, v2):
    n, k, groups = len(q), len(q[0]), len(zero[0])
    off = 0 if v2 else 1  # v1 stores zero - 1 in each nibble
    qweight = [sum(q[r][8 * b + i] << (4 * i) for i in range(8))
               for b in range(k // 8) for r in range(n)]
    qzeros = [sum(((zero[8 * c + i][g] - off) & 0xF) << (4 * i) for i in range(8))
              for g in range(groups) for c in range(n // 8)]
    scales = [scale[r][g] for g in range(groups) for r in range(n)]
    return {"qweight": ("I32", [k // 8, n], qweight), "qzeros": ("I32", [groups, n // 8], qzeros),
            "scales": ("F16", [groups, n], scales),
            "g_idx": ("I32", [k], [j // group for j in range(k)])}


def dequant_int4(q, zero, scale, group):
    return [[(q[r][j] - zero[r][j // group]) * scale[r][j // group] for j in range(len(q[r]))]
            for r in range(len(q))]


def dequant_fp8(q, scales):
    per_tensor = len(scales) == 1
    return [[e4m3_value(c) * scales[0 if per_tensor else i] for c in row] for i, row in enumerate(q)]


# ---- quantization_config as the real tools write it ---------------------------------------------

def quantization_config(opts):
    m = opts["method"]
    if m == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": opts["group"], "zero_point": True,
                "version": "gemm", "modules_to_not_convert": None}
    if m == "gptq":
        return {"quant_method": "gptq", "bits": 4, "group_size": opts["group"], "desc_act": False,
                "sym": opts["sym"], "checkpoint_format": "gptq_v2" if opts["v2"] else "gptq",
                "static_groups": False, "true_sequential": True, "damp_percent": 0.01}
    weights = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False,
               "strategy": opts["strategy"], "group_size": None, "observer": "minmax"}
    acts = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": True,
            "strategy": "token"}
    return {"quant_method": "compressed-tensors", "format": "float-quantized",
            "quantization_status": "compressed", "ignore": ["lm_head"], "kv_cache_scheme": None,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": acts, "output_activations": None}}}


# ---- safetensors --------------------------------------------------------------------------------

def read_safetensors(path):
    """-> {name: (dtype, shape, raw bytes)}"""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], data[8 + n + b:8 + n + end])
    return out


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype, shape, raw bytes)"""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, _, raw in tensors:
            f.write(raw)


# ---- whole checkpoints --------------------------------------------------------------------------

def quantize_module(opts, w):
    """-> ({part: (dtype, shape, values)}, dequantized rows)"""
    m = opts["method"]
    if m == "fp8":
        q, scales = quantize_fp8(w, opts["strategy"] == "tensor", opts["dense_dtype"])
        shape = [1] if len(scales) == 1 else [len(w), 1]
        parts = {"weight": ("F8_E4M3", [len(w), len(w[0])], [c for r in q for c in r]),
                 "weight_scale": (opts["dense_dtype"], shape, scales)}
        return parts, dequant_fp8(q, scales)
    group = opts["group"]
    if m == "awq":
        q, z, s = quantize_awq(w, group)
        parts = pack_awq(q, z, s)
    else:
        q, z, s = quantize_gptq(w, group, opts["sym"])
        parts = pack_gptq(q, z, s, group, opts["v2"])
    return parts, dequant_int4(q, z, s, group)


def is_quantized(name):
    return name.startswith("model.layers.") and any(
        name.endswith("." + p + ".weight") for p in LINEARS)


def pack_checkpoint(opts, source):
    """source: {name: (dtype, shape, raw)} of an F32 model.
    -> (packed tensors [(name, dtype, shape, raw)], dense twin tensors [...] as F32)"""
    packed, dense = [], []
    for name in source:
        dtype, shape, raw = source[name]
        assert dtype == "F32", name
        values = decode("F32", raw)
        if not is_quantized(name):
            stored = [round_to(opts["dense_dtype"], v) for v in values]
            packed.append((name, opts["dense_dtype"], shape, encode(opts["dense_dtype"], stored)))
            dense.append((name, "F32", shape, encode("F32", stored)))
            continue
        n, k = shape
        rows = [values[r * k:(r + 1) * k] for r in range(n)]
        parts, deq = quantize_module(opts, rows)
        module = name[:-len(".weight")]
        for part, (pdtype, pshape, pvalues) in parts.items():
            packed.append((module + "." + part, pdtype, pshape, encode(pdtype, pvalues)))
        dense.append((name, "F32", shape, encode("F32", [v for r in deq for v in r])))
    return packed, dense
