# lit configuration of the llmc IR tests. Loaded through the lit.site.cfg.py
# that CMake writes into the build dir; run `lit -v <build>/tests/lit`.
import os

import lit.formats

config.name = "llmc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.llmc_binary_root, "tests/lit")


def tool(name):
    # Whole words only: not inside paths (%s) or longer names.
    return r"(?<![-./\w])" + name.replace("-", r"\-") + r"(?![-./\w])"


for name, path in [
    ("llm-opt", config.llm_opt),
    ("FileCheck", config.filecheck),
    ("not", config.not_tool),
]:
    if not os.path.exists(path):
        lit_config.fatal(f"{name} not found at {path}: build it first")
    config.substitutions.append((tool(name), path))
