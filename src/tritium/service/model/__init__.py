"""A model as requests see it: the loaded version, its signature and output handling, and
the model table every lookup and every walk over loaded versions goes through."""
