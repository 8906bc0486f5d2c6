"""Records custom metrics of each kind: a counter (+1 per request), a gauge (last X) and a
histogram of X. Families are made in initialize (counter, gauge) and in the first execute
(histogram), by each of the two instances. X < 0 asks for an invalid family name and
answers with the model's error text."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        requests = pb_utils.MetricFamily(
            name="custom_requests_total",
            description='Requests seen by "custom_metrics"',
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.counter = requests.Metric(labels={"model": "custom_metrics", "note": 'a "quoted"\nvalue'})
        last = pb_utils.MetricFamily(
            name="custom_last_x", description="Last X seen", kind=pb_utils.MetricFamily.GAUGE
        )
        self.gauge = last.Metric(labels={})
        self.histogram = None

    def execute(self, requests):
        if self.histogram is None:
            family = pb_utils.MetricFamily(
                name="custom_x", description="X values", kind=pb_utils.MetricFamily.HISTOGRAM
            )
            self.histogram = family.Metric(labels={"unit": "none"}, buckets=[1.0, 2.0, 5.0])
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            value = float(x[0])
            if value < 0:
                try:
                    pb_utils.MetricFamily(name="bad-name", description="", kind=0)
                except pb_utils.TritonModelException as exc:
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
                    continue
            self.counter.increment(1)
            self.gauge.set(value)
            self.histogram.observe(value)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x.astype(np.float32))]))
        return responses
