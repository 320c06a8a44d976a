"""Tables of operator timings (JSON lines, fakegpu/kernel_cases.py): reading them and comparing
the model's figures with measured ones. No PyTorch needed."""

import json
import math


def read_table(path):
    """The lines of a timing table (JSON lines), with the line number of each."""
    lines = []
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if text.strip():
                try:
                    lines.append((number, json.loads(text)))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not a JSON object ({e.msg})") from None
    return lines


def error(predicted, measured):
    """predicted / measured - 1."""
    return predicted / measured - 1 if measured else math.inf
