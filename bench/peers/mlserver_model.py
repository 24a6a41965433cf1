"""MLServer 1.7 runtime for an ExecuTorch program: `parameters.uri` in model-settings.json
names the .pte; each request's inputs, in order, are the program's."""

from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse

from executorch_program import Program


class ExecuTorchModel(MLModel):
    async def load(self) -> bool:
        self._program = Program(self.settings.parameters.uri)
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        inputs = [NumpyCodec.decode_input(i) for i in payload.inputs]
        outputs = self._program.forward(inputs)
        return InferenceResponse(
            model_name=self.name,
            outputs=[NumpyCodec.encode_output(f"output_{i}", o) for i, o in enumerate(outputs)],
        )
