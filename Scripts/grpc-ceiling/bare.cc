// A gRPC server that does nothing: every call of any method is read and answered with 40 fixed
// bytes, on grpc++'s asynchronous generic API with THREADS completion-queue threads (the transport
// `modelc serve` uses). What grpc++ itself costs a call, with no protocol, model or handoff.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

struct Call;
enum class Step { requested, read, finished };
struct Tag { Call *call; Step step; };

struct Call {
    grpc::GenericServerContext context;
    grpc::GenericServerAsyncReaderWriter stream{&context};
    grpc::ByteBuffer request;
    Tag requested{this, Step::requested}, read{this, Step::read}, finished{this, Step::finished};
};

static grpc::AsyncGenericService service;

static void post(grpc::ServerCompletionQueue *queue) {
    auto *call = new Call;
    service.RequestCall(&call->context, &call->stream, queue, queue, &call->requested);
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 50061, threads = argc > 2 ? atoi(argv[2]) : 2;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials());
    builder.RegisterAsyncGenericService(&service);
    std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues;
    for (int i = 0; i < threads; i++) queues.push_back(builder.AddCompletionQueue());
    auto server = builder.BuildAndStart();
    static const char answer[40] = {0x0a, 0x05, 'm', 'o', 'd', 'e', 'l'};
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; i++) {
        workers.emplace_back([queue = queues[i].get()] {
            for (int j = 0; j < 64; j++) post(queue);
            void *raw; bool ok;
            while (queue->Next(&raw, &ok)) {
                auto *tag = static_cast<Tag *>(raw);
                Call *call = tag->call;
                switch (tag->step) {
                case Step::requested:
                    post(queue);
                    if (!ok) { delete call; break; }
                    call->stream.Read(&call->request, &call->read);
                    break;
                case Step::read: {
                    if (!ok) { delete call; break; }
                    grpc::Slice slice(answer, sizeof answer);
                    grpc::ByteBuffer reply(&slice, 1);
                    call->stream.WriteAndFinish(reply, grpc::WriteOptions(), grpc::Status::OK, &call->finished);
                    break;
                }
                case Step::finished: delete call; break;
                }
            }
        });
    }
    fprintf(stderr, "listening on %d, %d threads\n", port, threads);
    for (auto &worker : workers) worker.join();
}
