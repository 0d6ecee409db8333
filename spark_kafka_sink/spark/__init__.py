"""The PySpark DataSource adapter: thin and picklable."""
