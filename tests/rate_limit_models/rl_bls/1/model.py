"""Rate limiter test model: needs no resource itself; calls rl_high (which needs R1) by BLS
with its inputs and answers rl_high's SPAN."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="rl_high",
                inputs=[
                    pb_utils.get_input_tensor_by_name(request, "MS"),
                    pb_utils.get_input_tensor_by_name(request, "GATE"),
                ],
                requested_output_names=["SPAN"],
            )
            answer = call.exec()
            if answer.has_error():
                responses.append(pb_utils.InferenceResponse(error=answer.error()))
                continue
            span = pb_utils.get_output_tensor_by_name(answer, "SPAN")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SPAN", span.as_numpy())]))
        return responses
