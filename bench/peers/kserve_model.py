"""KServe 0.21 model server for an ExecuTorch program (Open Inference Protocol, REST and gRPC):
python kserve_model.py --model_name NAME --pte FILE --http_port P --grpc_port Q."""

import argparse

from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer, model_server
from kserve.utils.numpy_codec import from_np_dtype

from executorch_program import Program


class ExecuTorchModel(Model):
    def __init__(self, name: str, pte: str):
        super().__init__(name)
        self._pte = pte
        self.ready = False

    def load(self) -> bool:
        self._program = Program(self._pte)
        self.ready = True
        return self.ready

    # With --workers N, KServe pickles the model into each worker process: the program is not
    # picklable, so each worker loads its own.
    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_program", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._program = Program(self._pte)

    def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        inputs = [i.as_numpy() for i in payload.inputs]
        outputs = []
        for i, o in enumerate(self._program.forward(inputs)):
            out = InferOutput(name=f"output_{i}", shape=list(o.shape), datatype=from_np_dtype(o.dtype))
            out.set_data_from_numpy(o, binary_data=False)
            outputs.append(out)
        return InferResponse(response_id=payload.id or "", model_name=self.name, infer_outputs=outputs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(parents=[model_server.parser])
    parser.add_argument("--pte", required=True)
    args, _ = parser.parse_known_args()
    model = ExecuTorchModel(args.model_name, args.pte)
    model.load()
    ModelServer().start([model])
