import base64
import io
import zipfile

from kubenest_agent.pyzygote import Warm, zip_bytes


def _payload(files: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return b"def main():\n    pass\nmain(\nzip_data='" + base64.b64encode(buf.getvalue()) + b"'\n)\n"


def _members(payload):
    zf = zipfile.ZipFile(io.BytesIO(zip_bytes(payload)))
    return {i.filename: (i.CRC, i.file_size) for i in zf.infolist()}


def test_identical_preloaded_members_are_compatible():
    first = _payload({"ansible/module_utils/basic.py": "A = 1\n", "ansible/modules/ping.py": "x"})
    warm = Warm("/nonexistent.zip", {"ansible/module_utils/basic.py": _members(first)["ansible/module_utils/basic.py"]})
    other_module = _payload({"ansible/module_utils/basic.py": "A = 1\n", "ansible/modules/copy.py": "y"})
    assert warm.compatible(other_module)


def test_changed_or_missing_member_is_not_compatible():
    first = _payload({"ansible/module_utils/basic.py": "A = 1\n"})
    warm = Warm("/nonexistent.zip", _members(first))
    assert not warm.compatible(_payload({"ansible/module_utils/basic.py": "A = 2\n"}))
    assert not warm.compatible(_payload({"ansible/module_utils/other.py": "A = 1\n"}))


def test_payload_without_zip_is_not_compatible():
    warm = Warm("/nonexistent.zip", {"a.py": (1, 1)})
    assert zip_bytes(b"print('plain script')\n") is None
    assert not warm.compatible(b"print('plain script')\n")
    assert not warm.compatible(b"\nzip_data='bm90IGEgemlw'\n")
