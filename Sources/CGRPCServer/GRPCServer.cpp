// The gRPC transport of `modelc serve`: grpc++'s asynchronous API with one generic service, so
// every method's request arrives as bytes; threads of our own take the calls off a completion
// queue and hand each to the C handler on the thread that took it (no protocol knowledge here,
// see CGRPCServer.h).
#include "CGRPCServer.h"

#include <grpc/support/log.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

// grpc logs through one process-wide function: its lines go to the running server's logger,
// or, while a server starts, are kept so that a failed start can name the cause.
std::mutex log_mutex;
modelc_grpc_server *log_target = nullptr;
std::string start_log;

void log_line(gpr_log_func_args *arguments);

// What a completion of the queue is about: one step of one call.
enum class Step { requested, read, finished, done };

struct Tag {
    modelc_grpc_call *call;
    Step step;
};

}  // namespace

// One call, from the request for it posted on the queue to its last completion. Two completions
// end it once it has started: `finished` (our answer sent, or failed) and `done` (grpc's notice
// that the call is over, which also says whether it was cancelled); it is freed after both.
struct modelc_grpc_call {
    explicit modelc_grpc_call(modelc_grpc_server *server) : server(server) {}

    modelc_grpc_server *const server;
    grpc::GenericServerContext context;
    grpc::GenericServerAsyncReaderWriter stream{&context};
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    std::vector<unsigned char> message;
    std::deque<std::string> metadata;
    std::atomic<bool> cancelled{false};
    std::atomic<int> completions_left{2};
    Tag requested{this, Step::requested};
    Tag read{this, Step::read};
    Tag finished{this, Step::finished};
    Tag done{this, Step::done};

    void complete_one() {
        if (completions_left.fetch_sub(1) == 1) delete this;
    }
};

struct modelc_grpc_server {
    explicit modelc_grpc_server(const modelc_grpc_configuration &configuration) : configuration(configuration) {}

    // Posts one request for the next call (while the queue takes them).
    void request_call() {
        std::lock_guard<std::mutex> lock(mutex);
        if (!accepting) return;
        auto *call = new modelc_grpc_call(this);
        call->context.AsyncNotifyWhenDone(&call->done);
        service.RequestCall(&call->context, &call->stream, queue.get(), queue.get(), &call->requested);
    }

    // Starts one more thread taking completions off the queue.
    void start_poller() {
        threads.emplace_back([this] { poll(); });
    }

    void poll() {
        pthread_setname_np(pthread_self(), "modelc-grpc");
        void *tag = nullptr;
        bool ok = false;
        while (queue->Next(&tag, &ok)) {
            auto *step = static_cast<Tag *>(tag);
            modelc_grpc_call *call = step->call;
            switch (step->step) {
            case Step::requested:
                if (!ok) {  // the server is shutting down: the call never started, nor will `done` come
                    delete call;
                    break;
                }
                request_call();
                call->stream.Read(&call->request, &call->read);
                break;
            case Step::read:
                if (!ok) {
                    call->stream.Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request message"),
                                        &call->finished);
                    break;
                }
                handle(call);
                break;
            case Step::finished:
                call->complete_one();
                break;
            case Step::done:
                call->cancelled.store(call->context.IsCancelled());
                call->complete_one();
                break;
            }
        }
    }

    // Hands a call whose message has arrived to the handler on this thread; a thread more takes
    // completions meanwhile when no other is free to.
    void handle(modelc_grpc_call *call) {
        std::vector<grpc::Slice> slices;
        if (!call->request.Dump(&slices).ok()) {
            call->stream.Finish(grpc::Status(grpc::StatusCode::INTERNAL, "the request message could not be read"), &call->finished);
            return;
        }
        size_t size = 0;
        for (const auto &slice : slices) size += slice.size();
        call->message.reserve(size);
        for (const auto &slice : slices) call->message.insert(call->message.end(), slice.begin(), slice.end());
        call->request.Clear();
        if (in_progress.fetch_add(1) >= static_cast<long>(configuration.max_calls)) {
            in_progress.fetch_sub(1);
            call->stream.Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "server busy: " + std::to_string(configuration.max_calls) +
                                                                                       " calls under way; retry later"),
                                &call->finished);
            return;
        }
        {
            std::lock_guard<std::mutex> lock(mutex);
            handling++;
            if (handling >= threads.size() && accepting) start_poller();
        }
        configuration.handler(configuration.context, call);
        std::lock_guard<std::mutex> lock(mutex);
        handling--;
    }

    const modelc_grpc_configuration configuration;
    grpc::AsyncGenericService service;
    std::unique_ptr<grpc::ServerCompletionQueue> queue;
    std::unique_ptr<grpc::Server> server;
    int port = 0;
    std::atomic<long> in_progress{0};
    // Under `mutex`: whether requests for calls are posted, the threads, how many are in a handler.
    std::mutex mutex;
    bool accepting = true;
    std::vector<std::thread> threads;
    size_t handling = 0;
    std::thread shutdown;
};

namespace {

void log_line(gpr_log_func_args *arguments) {
    std::lock_guard<std::mutex> lock(log_mutex);
    const char *text = arguments->message ? arguments->message : "";
    if (log_target && log_target->configuration.logger) {
        std::string line = std::string("grpc: ") + text;
        for (char &c : line) if (c == '\n') c = ' ';
        log_target->configuration.logger(log_target->configuration.context, line.c_str());
    } else if (!log_target && start_log.size() < 4096) {
        start_log += text;
        start_log += '\n';
    }
}

// Why `host:port` cannot be bound, asking the system directly (grpc's own errors are long).
std::string bind_reason(const char *host, int port) {
    sockaddr_storage address{};
    socklen_t length = 0;
    auto *v4 = reinterpret_cast<sockaddr_in *>(&address);
    auto *v6 = reinterpret_cast<sockaddr_in6 *>(&address);
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(static_cast<uint16_t>(port));
        length = sizeof *v4;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(static_cast<uint16_t>(port));
        length = sizeof *v6;
    } else {
        return "not a numeric address";
    }
    int probe = socket(address.ss_family, SOCK_STREAM, 0);
    if (probe < 0) return std::strerror(errno);
    std::string reason;
    if (bind(probe, reinterpret_cast<sockaddr *>(&address), length) != 0) reason = std::strerror(errno);
    close(probe);
    return reason;
}

}  // namespace

extern "C" {

modelc_grpc_server *modelc_grpc_start(const modelc_grpc_configuration *configuration, char *failure, size_t failure_size,
                                      int *bind_failed) {
    *bind_failed = 0;
    auto server = std::make_unique<modelc_grpc_server>(*configuration);
    std::string host = configuration->host ? configuration->host : "127.0.0.1";
    std::string address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                          std::to_string(configuration->port);
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (configuration->tls_certificate && configuration->tls_key) {
        grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
        options.pem_key_cert_pairs.push_back({configuration->tls_key, configuration->tls_certificate});
        credentials = grpc::SslServerCredentials(options);
    }
    {
        std::lock_guard<std::mutex> lock(log_mutex);
        static std::once_flag installed;
        std::call_once(installed, [] {
            gpr_set_log_function(log_line);
            gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
        });
        start_log.clear();
    }
    grpc::ServerBuilder builder;
    // Another process on the same port is an error, not a second listener sharing it.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(configuration->max_message_bytes, INT32_MAX)));
    builder.AddListeningPort(address, credentials, &server->port);
    builder.RegisterAsyncGenericService(&server->service);
    server->queue = builder.AddCompletionQueue();
    server->server = builder.BuildAndStart();
    if (!server->server || server->port == 0) {
        std::string reason = bind_reason(host.c_str(), configuration->port);
        if (!reason.empty()) {
            *bind_failed = 1;
        } else {
            std::lock_guard<std::mutex> lock(log_mutex);
            reason = start_log.empty() ? "grpc could not start a server" : start_log.substr(0, start_log.find('\n'));
        }
        std::snprintf(failure, failure_size, "%s", reason.c_str());
        return nullptr;
    }
    // As many calls awaited at once, and threads taking completions, as there are cores (2 at least);
    // more threads start while handlers hold these.
    unsigned pollers = std::max(2u, std::thread::hardware_concurrency());
    for (unsigned index = 0; index < pollers; index++) server->request_call();
    {
        std::lock_guard<std::mutex> lock(server->mutex);
        for (unsigned index = 0; index < pollers; index++) server->start_poller();
    }
    std::lock_guard<std::mutex> lock(log_mutex);
    log_target = server.get();
    return server.release();
}

int modelc_grpc_port(const modelc_grpc_server *server) { return server->port; }

long modelc_grpc_calls_in_progress(const modelc_grpc_server *server) { return server->in_progress.load(); }

void modelc_grpc_shutdown(modelc_grpc_server *server, long grace_milliseconds) {
    auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(grace_milliseconds);
    server->shutdown = std::thread([server, deadline] { server->server->Shutdown(deadline); });
}

void modelc_grpc_stop(modelc_grpc_server *server) {
    if (!server->shutdown.joinable()) modelc_grpc_shutdown(server, 0);
    server->shutdown.join();
    server->server->Wait();
    std::vector<std::thread> threads;
    {
        std::lock_guard<std::mutex> lock(server->mutex);
        server->accepting = false;
        threads.swap(server->threads);
    }
    // The threads take what is left off the queue (the calls requested and never started come back
    // not ok) and end when it is empty.
    server->queue->Shutdown();
    for (auto &thread : threads) thread.join();
    {
        std::lock_guard<std::mutex> lock(log_mutex);
        if (log_target == server) log_target = nullptr;
    }
    delete server;
}

const char *modelc_grpc_call_method(const modelc_grpc_call *call) { return call->context.method().c_str(); }

const unsigned char *modelc_grpc_call_message(const modelc_grpc_call *call, size_t *size) {
    *size = call->message.size();
    return call->message.data();
}

const char *modelc_grpc_call_metadata(const modelc_grpc_call *call, const char *key) {
    const auto &metadata = call->context.client_metadata();
    auto found = metadata.find(key);
    if (found == metadata.end()) return nullptr;
    auto *mutable_call = const_cast<modelc_grpc_call *>(call);
    mutable_call->metadata.emplace_back(found->second.data(), found->second.size());
    return mutable_call->metadata.back().c_str();
}

int64_t modelc_grpc_call_deadline_nanoseconds(const modelc_grpc_call *call) {
    auto deadline = call->context.deadline();
    if (deadline == std::chrono::system_clock::time_point::max()) return INT64_MAX;
    auto remaining = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::system_clock::now()).count();
    return static_cast<int64_t>(remaining);
}

int modelc_grpc_call_cancelled(const modelc_grpc_call *call) { return call->cancelled.load() ? 1 : 0; }

void modelc_grpc_call_finish(modelc_grpc_call *call, int code, const char *message, const unsigned char *response,
                             size_t response_size) {
    call->server->in_progress.fetch_sub(1);
    if (code == 0) {
        grpc::Slice slice(response, response_size);
        call->response = grpc::ByteBuffer(&slice, 1);
        call->stream.WriteAndFinish(call->response, grpc::WriteOptions(), grpc::Status::OK, &call->finished);
    } else {
        call->stream.Finish(grpc::Status(static_cast<grpc::StatusCode>(code), message ? message : ""), &call->finished);
    }
}

const char *modelc_grpc_version(void) {
    static const std::string version = grpc::Version();
    return version.c_str();
}

}  // extern "C"
