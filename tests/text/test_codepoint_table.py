import unicodedata

import numpy as np
import pytest

from bert_tf.text.codepoint_table import TABLES_FILE, UNICODE_VERSION, write_tables

# What the tables say is checked against the reference, code point by code point, through the
# tokenizer that loads them (tests/text/test_basic_tokenizer.py); here, that the shipped file is
# the one the rules in codepoint_table.py build.


@pytest.mark.skipif(unicodedata.unidata_version != UNICODE_VERSION,
                    reason=f"the tables are built from Unicode {UNICODE_VERSION} (Python 3.11)")
def test_shipped_file_is_what_write_tables_writes(tmp_path):
    write_tables(tmp_path / "built.npz")
    with np.load(TABLES_FILE) as shipped, np.load(tmp_path / "built.npz") as built:
        assert sorted(shipped.files) == sorted(built.files)
        for name in built.files:
            assert shipped[name].dtype == built[name].dtype, name
            np.testing.assert_array_equal(shipped[name], built[name], err_msg=name)


def test_write_tables_refuses_another_unicode_version(monkeypatch, tmp_path):
    monkeypatch.setattr(unicodedata, "unidata_version", "15.0.0")
    with pytest.raises(RuntimeError, match=r"built from Unicode 14\.0\.0 \(Python 3\.11\); this "
                                           r"Python's unicodedata is Unicode 15\.0\.0"):
        write_tables(tmp_path / "built.npz")
    assert not (tmp_path / "built.npz").exists()
