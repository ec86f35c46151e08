"""`bert_tf.data.tfds.catalog`: what the error for a dataset that is not prepared suggests."""

import pytest

from bert_tf.data.tfds.catalog import TfdsInputError, prepared_builder

LOCAL = "or from local files with `python -m bert_tf.data.tfds.local_preparation`"


def test_a_dataset_not_prepared_is_named_with_how_to_prepare_it(tmp_path):
    with pytest.raises(TfdsInputError) as error:
        prepared_builder("glue/sst2", str(tmp_path))
    assert str(error.value) == (
        f"TFDS dataset 'glue/sst2' is not prepared in {tmp_path}/glue/sst2/2.0.0 (nothing is "
        f"downloaded at run time): prepare it first with `tfds build glue/sst2 "
        f"--data_dir=...`, {LOCAL}")


@pytest.mark.parametrize("tfds_name", ["c4/en", "wikipedia/20230601.en"])
def test_local_preparation_is_suggested_only_for_datasets_it_prepares(tmp_path, tfds_name):
    # bert_tf.data.tfds.local_preparation refuses these: suggesting it sent users in a circle.
    with pytest.raises(TfdsInputError, match=rf"prepare it first with `tfds build {tfds_name} "
                                             rf"--data_dir=...`$"):
        prepared_builder(tfds_name, str(tmp_path))
