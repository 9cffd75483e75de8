# lit configuration of the llmc IR tests. Loaded through the lit.site.cfg.py
# that CMake writes into the build dir; run `lit -v <build>/tests/lit`.
import os
import sys

import lit.formats

config.name = "llmc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.llmc_binary_root, "tests/lit")
# Files that RUN lines read (configs, tokenizers), not tests.
config.excludes = ["Inputs"]


def tool(name):
    # Whole words only: not inside paths (%s) or longer names.
    return r"(?<![-./\w])" + name.replace("-", r"\-") + r"(?![-./\w])"


# llmc is built next to llm-opt (tools/).
config.llmc = os.path.join(os.path.dirname(config.llm_opt), "llmc")

for name, path in [
    ("llm-opt", config.llm_opt),
    ("llmc", config.llmc),
    ("FileCheck", config.filecheck),
    ("not", config.not_tool),
]:
    if not os.path.exists(path):
        lit_config.fatal(f"{name} not found at {path}: build it first")
    config.substitutions.append((tool(name), path))

# %python: the interpreter running lit, for small checks in RUN lines.
config.substitutions.append(("%python", sys.executable))

# The models bundled with llmc (assets/, in every clone): %llmc_assets/stories260k.
config.substitutions.append(("%llmc_assets", os.path.join(config.llmc_source_root, "assets")))

# The read-only reference data next to the checkout (../shared): tests that
# read it say `REQUIRES: shared` and name files as %llmc_shared/models/...
shared = os.path.normpath(os.path.join(config.llmc_source_root, "..", "shared"))
if os.path.isdir(shared):
    config.available_features.add("shared")
    config.substitutions.append(("%llmc_shared", shared))
