"""Models made of other models' requests: ensembles and model code's own requests (BLS),
each given the submitter and the model table it submits through."""
