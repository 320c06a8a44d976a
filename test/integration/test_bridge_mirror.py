"""The PyTorch hook's ctypes mirror of the runtime's table (fakegpu/torch_hook/bridge.py)
against the C headers it mirrors (common/bridge/op_facts.h, common/bridge/fake_torch_bridge.h): every enum value,
flag, version and struct field the same, in the same order and of the same type. A header changed
without its mirror fails here, not as wrong figures in a PyTorch job."""

import ctypes
import re
import sys
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from fakegpu.torch_hook import bridge as B  # noqa: E402

HEADERS = {name: (REPO / "common" / "bridge" / name).read_text() for name in ("op_facts.h", "fake_torch_bridge.h",
                                                                    "fake_cuda_bridge.h")}
C_TYPES = {"int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64,
           "uint64_t": ctypes.c_uint64, "double": ctypes.c_double, "int": ctypes.c_int, "unsigned": ctypes.c_uint}


def without_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def enum(header, name):
    """name -> value of a C enum whose members all have explicit values."""
    body = re.search(r"enum " + name + r"\s*\{(.*?)\};", without_comments(HEADERS[header]), re.S).group(1)
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"(\w+)\s*=\s*(\d+)", body)}


def define(header, name):
    return int(re.search(r"#define " + name + r"\s+(\w+?)u?\b", HEADERS[header]).group(1), 0)


def struct_fields(header, name):
    """(field, C type, array length or None) of a C struct, in order; function pointers as ('fn', None)."""
    body = re.search(r"typedef struct " + name + r"\s*\{(.*?)\}\s*" + name + ";", without_comments(HEADERS[header]),
                     re.S).group(1)
    fields = []
    for decl in (d.strip() for d in body.split(";") if d.strip()):
        pointer = re.match(r"\w+\s*\(\*(\w+)\)", decl)
        if pointer:
            fields.append((pointer.group(1), "fn", None))
            continue
        m = re.match(r"(\w+)\s+(\w+)(?:\[(\w+)\])?$", decl)
        fields.append((m.group(2), m.group(1), m.group(3)))
    return fields


class Mirror(unittest.TestCase):
    def test_the_version_and_the_constants(self):
        self.assertEqual(B.VERSION, define("fake_torch_bridge.h", "FAKEGPU_TORCH_BRIDGE_VERSION"))
        self.assertEqual(B.LARGEST_BLOCKS, define("fake_cuda_bridge.h", "FAKEGPU_MEMORY_LARGEST_BLOCKS"))
        self.assertEqual(B.SHARE_UNITS, define("op_facts.h", "FAKEGPU_OP_SHARE_UNITS"))

    def test_every_enum_and_flag(self):
        kinds = {k[len("FAKEGPU_OP_"):]: v for k, v in enum("op_facts.h", "fakegpu_op_kind").items()
                 if k != "FAKEGPU_OP_KIND_COUNT"}
        self.assertEqual({k: getattr(B, k) for k in kinds}, kinds)
        self.assertEqual(len(kinds), enum("op_facts.h", "fakegpu_op_kind")["FAKEGPU_OP_KIND_COUNT"])
        maths = {k[len("FAKEGPU_MATH_"):]: v for k, v in enum("op_facts.h", "fakegpu_op_math").items()
                 if k != "FAKEGPU_MATH_COUNT"}
        self.assertEqual({k: getattr(B, k) for k in maths}, maths)
        flags = {m.group(1): int(m.group(2)) for m in
                 re.finditer(r"#define FAKEGPU_OP_(\w+) (\d+)u", HEADERS["op_facts.h"])}
        self.assertEqual(set(flags), {"IN_BACKWARD", "CAUSAL", "CHANNELS_LAST", "RECORDS_GRAD", "FLEX"})
        self.assertEqual({k: getattr(B, k) for k in flags}, flags)
        events = {k[len("FAKEGPU_HOST_"):]: v for k, v in enum("fake_torch_bridge.h", "fakegpu_host_event").items()}
        self.assertEqual({k: getattr(B, k) for k in events}, events)
        bounds = enum("op_facts.h", "fakegpu_op_bound")
        self.assertEqual({name.upper(): i for i, name in enumerate(B.BOUND_NAMES)},
                         {k[len("FAKEGPU_BOUND_"):]: v for k, v in bounds.items()})

    def check_struct(self, mirror, header, name):
        c = struct_fields(header, name)
        self.assertEqual([f[0] for f in mirror._fields_], [f[0] for f in c], name)
        for (field, ctype), (_, c_type, length) in zip(mirror._fields_, c):
            if c_type == "fn":
                self.assertTrue(issubclass(ctype, ctypes._CFuncPtr), f"{name}.{field}")
                continue
            expected = C_TYPES[c_type]
            if length:
                expected = expected * (int(length) if length.isdigit() else define(header, length))
                self.assertEqual((ctype._type_, ctype._length_), (expected._type_, expected._length_), f"{name}.{field}")
            else:
                self.assertIs(ctype, expected, f"{name}.{field}")

    def test_every_struct_field(self):
        self.check_struct(B.OpFacts, "op_facts.h", "fakegpu_op_facts")
        self.check_struct(B.OpCost, "op_facts.h", "fakegpu_op_cost")
        self.check_struct(B._Table, "fake_torch_bridge.h", "fakegpu_torch_bridge_table")

    def test_a_drifted_header_fails(self):
        # The checks themselves can fail: a field renamed in a copy of the header is caught.
        saved = HEADERS["op_facts.h"]
        try:
            HEADERS["op_facts.h"] = saved.replace("int32_t workspace_calls;", "int32_t scratch_calls;")
            with self.assertRaises(AssertionError):
                self.check_struct(B.OpCost, "op_facts.h", "fakegpu_op_cost")
        finally:
            HEADERS["op_facts.h"] = saved


if __name__ == "__main__":
    unittest.main()
