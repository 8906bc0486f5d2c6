"""A model whose execute raises instead of returning responses."""


class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("execute exploded on purpose")
