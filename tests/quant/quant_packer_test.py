"""pkv-make-model --quant against the independent packer (quant_packer.py), and the C++ reader
against the packer's output.

For each case: pkv-make-model writes the unquantized float32 model and the quantized checkpoint
from the same seed; this script quantizes and packs the float32 weights itself and checks that
  1. every tensor of the C++ checkpoint has the packer's name, dtype, shape and bytes, and its
     config.json quantization_config says what the packer's does;
  2. the C++ runtime loads the packer's own checkpoint (its config.json written here, as the real
     tools write it) and the C++ one to float32 weights bit-identical to the packer's dequantized
     dense twin, and generates the same greedy tokens from all three (pkv-quant-check), on one
     CPU rank and split over two tensor-parallel ranks.
  python3 quant_packer_test.py --make_model BIN --check BIN --workdir DIR
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant_packer as qp  # noqa: E402

CASES = [
    ("awq_g32", {"method": "awq", "group": 32, "dense_dtype": "F16"}, []),
    ("gptq_sym_g32", {"method": "gptq", "group": 32, "sym": True, "v2": False,
                      "dense_dtype": "F16"}, []),
    ("gptq_asym_g16_v2", {"method": "gptq", "group": 16, "sym": False, "v2": True,
                          "dense_dtype": "F16"},
     ["--gptq_sym=false", "--gptq_format=gptq_v2"]),
    ("gptq_asym_g32_v1", {"method": "gptq", "group": 32, "sym": False, "v2": False,
                          "dense_dtype": "F16"}, ["--gptq_sym=false"]),
    ("fp8_channel", {"method": "fp8", "strategy": "channel", "dense_dtype": "BF16"}, []),
    ("fp8_tensor", {"method": "fp8", "strategy": "tensor", "dense_dtype": "BF16"},
     ["--fp8_strategy=tensor"]),
]
SEED = "7"


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise AssertionError("%s failed:\n%s" % (" ".join(cmd), r.stdout))
    return r.stdout


def make_model(args, out, extra):
    run([args.make_model, "--out", out, "--shape", "tiny", "--seed", SEED] + extra)


def compare_config(cpp_dir, opts):
    with open(os.path.join(cpp_dir, "config.json")) as f:
        got = json.load(f)["quantization_config"]
    want = qp.quantization_config(opts)
    keys = {"awq": ["quant_method", "bits", "group_size", "zero_point", "version"],
            "gptq": ["quant_method", "bits", "group_size", "desc_act", "sym", "checkpoint_format"],
            "fp8": ["quant_method", "format", "ignore", "quantization_status"]}[opts["method"]]
    for key in keys:
        if str(got.get(key)).lower() != str(want[key]).lower():
            raise AssertionError("quantization_config.%s = %r, expected %r" %
                                 (key, got.get(key), want[key]))
    if opts["method"] == "fp8":
        w = got["config_groups"]["group_0"]["weights"]
        for key in ["num_bits", "type", "strategy", "symmetric", "dynamic"]:
            if w[key] != want["config_groups"]["group_0"]["weights"][key]:
                raise AssertionError("weights.%s = %r" % (key, w[key]))


def compare_tensors(cpp, packed):
    names = sorted(cpp)
    want_names = sorted(t[0] for t in packed)
    if names != want_names:
        raise AssertionError("tensor names differ:\n only C++: %s\n only packer: %s" % (
            sorted(set(names) - set(want_names)), sorted(set(want_names) - set(names))))
    for name, dtype, shape, raw in packed:
        cdtype, cshape, craw = cpp[name]
        if (cdtype, cshape) != (dtype, shape):
            raise AssertionError("%s: C++ %s %s, packer %s %s" % (name, cdtype, cshape, dtype,
                                                                  shape))
        if craw != raw:
            first = next(i for i in range(len(raw)) if raw[i] != craw[i])
            raise AssertionError("%s: bytes differ first at byte %d of %d" % (name, first,
                                                                               len(raw)))


def write_model(src_dir, out_dir, tensors, quant_config=None, torch_dtype="float32"):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(src_dir, "config.json")) as f:
        config = json.load(f)
    config["torch_dtype"] = torch_dtype
    if quant_config is not None:
        config["quantization_config"] = quant_config
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for extra in ["generation_config.json", "tokenizer.json"]:
        shutil.copy(os.path.join(src_dir, extra), out_dir)
    qp.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)


def run_case(args, name, opts, extra):
    base = os.path.join(args.workdir, name)
    shutil.rmtree(base, ignore_errors=True)
    src, cpp, py, twin = (os.path.join(base, d) for d in ("f32", "cpp", "py", "dense_twin"))
    make_model(args, src, ["--dtype", "float32"])
    flags = ["--quant", opts["method"]]
    if opts["method"] != "fp8":
        flags += ["--group_size", str(opts["group"])]
    make_model(args, cpp, flags + extra)
    source = qp.read_safetensors(os.path.join(src, "model.safetensors"))
    packed, dense = qp.pack_checkpoint(opts, source)
    compare_config(cpp, opts)
    compare_tensors(qp.read_safetensors(os.path.join(cpp, "model.safetensors")), packed)
    torch_dtype = {"F16": "float16", "BF16": "bfloat16"}[opts["dense_dtype"]]
    write_model(src, py, packed, qp.quantization_config(opts), torch_dtype)
    write_model(src, twin, dense)
    for model in (cpp, py):
        out = run([args.check, "--a", model, "--b", twin, "--tp", "2"])
    print("%s: bytes identical; C++ and packer checkpoints load to the packer's dequantized "
          "weights\n%s" % (name, out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--make_model", required=True)
    ap.add_argument("--check", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = ap.parse_args()
    wanted = set(filter(None, args.cases.split(",")))
    failed = []
    for name, opts, extra in CASES:
        if wanted and name not in wanted:
            continue
        try:
            run_case(args, name, opts, extra)
        except AssertionError as e:
            print("FAIL %s: %s" % (name, e))
            failed.append(name)
    if failed:
        print("failed: %s" % ", ".join(failed))
        return 1
    print("all %d cases passed" % (len(CASES) if not wanted else len(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
