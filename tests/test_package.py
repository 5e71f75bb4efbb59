"""The package's top level: its public names load on first use, all together."""

import subprocess
import sys
import types

import transformer_lib


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_the_package_loads_no_pytorch():
    # the command lines install their Ctrl-C handler and the doctor runs before torch loads
    assert _run("import sys, transformer_lib; print('torch' in sys.modules)") == "False"
    assert (
        _run("import sys, transformer_lib.cli.stopping; print('torch' in sys.modules)") == "False"
    )


def test_every_public_name_is_the_object_of_its_module():
    for module, names in transformer_lib._EXPORTS.items():
        loaded = sys.modules.get(f"transformer_lib.{module}") or __import__(
            f"transformer_lib.{module}", fromlist=["_"]
        )
        for name in names:
            assert getattr(transformer_lib, name) is vars(loaded)[name], name
    assert sorted(n for names in transformer_lib._EXPORTS.values() for n in names) == sorted(
        transformer_lib.__all__
    )


def test_attention_stays_the_function_whichever_import_comes_first():
    # the submodule transformer_lib.attention loaded first must not replace the function
    code = (
        "import transformer_lib.attention, transformer_lib as tl; "
        "from transformer_lib import attention; "
        "print(type(tl.attention).__name__, type(attention).__name__)"
    )
    assert _run(code) == "function function"
    assert isinstance(transformer_lib.attention, types.FunctionType)


def test_an_unknown_name_is_an_attribute_error():
    try:
        transformer_lib.no_such_name
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("no AttributeError")
