"""Pre-training under tf.distribute: `PretrainingTrainer`, its optimizers, schedule and loss."""
