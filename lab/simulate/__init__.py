"""`krm simulate`: a model Kafka cluster of any size that publishes observations in the collectors'
schema, with scripted faults and the incidents each must produce (model.py, emit.py, faults.py)."""
