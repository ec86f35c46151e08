"""TensorFlow Datasets as a data source: catalog datasets read into the examples the file
readers make (`glue`, `squad`, `conll`, `multiple_choice`), pre-training text
(`pretraining_text`), and catalog datasets prepared offline from local source files
(`local_preparation`)."""
