"""Reading pre-training TFRecords (`pretraining_dataset`)."""
