// The gRPC transport of `modelc serve`: grpc++'s callback API with one generic service, so
// every method's request arrives as bytes and is handed to the C handler on a thread of our
// own; no protocol knowledge here (see CGRPCServer.h).
#include "CGRPCServer.h"

#include <grpc/support/log.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
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

}  // namespace

struct modelc_grpc_call final : grpc::ServerGenericBidiReactor {
    modelc_grpc_call(modelc_grpc_server *server, grpc::GenericCallbackServerContext *context);
    void OnReadDone(bool ok) override;
    void OnWriteDone(bool) override {}
    void OnCancel() override { cancelled.store(true); }
    void OnDone() override;

    modelc_grpc_server *const server;
    grpc::GenericCallbackServerContext *const context;
    const std::string method;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    std::vector<unsigned char> message;
    std::deque<std::string> metadata;
    std::atomic<bool> cancelled{false};
};

struct modelc_grpc_server final : grpc::CallbackGenericService {
    explicit modelc_grpc_server(const modelc_grpc_configuration &configuration) : configuration(configuration) {}

    grpc::ServerGenericBidiReactor *CreateReactor(grpc::GenericCallbackServerContext *context) override {
        return new modelc_grpc_call(this, context);
    }

    // Hands a call whose message has arrived to a worker thread, starting one when none is idle.
    void dispatch(modelc_grpc_call *call) {
        std::unique_lock<std::mutex> lock(mutex);
        if (in_progress.load() >= static_cast<long>(configuration.max_calls)) {
            lock.unlock();
            call->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                      "server busy: " + std::to_string(configuration.max_calls) + " calls under way; retry later"));
            return;
        }
        in_progress.fetch_add(1);
        queue.push_back(call);
        if (queue.size() > idle) workers.emplace_back([this] { work(); });
        ready.notify_one();
    }

    void work() {
        std::unique_lock<std::mutex> lock(mutex);
        while (true) {
            idle++;
            ready.wait(lock, [this] { return !queue.empty() || stopping; });
            idle--;
            if (queue.empty()) return;
            modelc_grpc_call *call = queue.front();
            queue.pop_front();
            lock.unlock();
            configuration.handler(configuration.context, call);
            lock.lock();
        }
    }

    const modelc_grpc_configuration configuration;
    std::unique_ptr<grpc::Server> server;
    int port = 0;
    std::atomic<long> in_progress{0};
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<modelc_grpc_call *> queue;
    size_t idle = 0;
    bool stopping = false;
    std::vector<std::thread> workers;
    std::thread shutdown;
};

modelc_grpc_call::modelc_grpc_call(modelc_grpc_server *server, grpc::GenericCallbackServerContext *context)
    : server(server), context(context), method(context->method()) {
    StartRead(&request);
}

void modelc_grpc_call::OnReadDone(bool ok) {
    if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request message"));
        return;
    }
    std::vector<grpc::Slice> slices;
    if (!request.Dump(&slices).ok()) {
        Finish(grpc::Status(grpc::StatusCode::INTERNAL, "the request message could not be read"));
        return;
    }
    size_t size = 0;
    for (const auto &slice : slices) size += slice.size();
    message.reserve(size);
    for (const auto &slice : slices) message.insert(message.end(), slice.begin(), slice.end());
    request.Clear();
    server->dispatch(this);
}

void modelc_grpc_call::OnDone() { delete this; }

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
    builder.RegisterCallbackGenericService(server.get());
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
    {
        std::lock_guard<std::mutex> lock(server->mutex);
        server->stopping = true;
    }
    server->ready.notify_all();
    for (auto &worker : server->workers) worker.join();
    {
        std::lock_guard<std::mutex> lock(log_mutex);
        if (log_target == server) log_target = nullptr;
    }
    delete server;
}

const char *modelc_grpc_call_method(const modelc_grpc_call *call) { return call->method.c_str(); }

const unsigned char *modelc_grpc_call_message(const modelc_grpc_call *call, size_t *size) {
    *size = call->message.size();
    return call->message.data();
}

const char *modelc_grpc_call_metadata(const modelc_grpc_call *call, const char *key) {
    const auto &metadata = call->context->client_metadata();
    auto found = metadata.find(key);
    if (found == metadata.end()) return nullptr;
    auto *mutable_call = const_cast<modelc_grpc_call *>(call);
    mutable_call->metadata.emplace_back(found->second.data(), found->second.size());
    return mutable_call->metadata.back().c_str();
}

int64_t modelc_grpc_call_deadline_nanoseconds(const modelc_grpc_call *call) {
    auto deadline = call->context->deadline();
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
        call->StartWriteAndFinish(&call->response, grpc::WriteOptions(), grpc::Status::OK);
    } else {
        call->Finish(grpc::Status(static_cast<grpc::StatusCode>(code), message ? message : ""));
    }
}

const char *modelc_grpc_version(void) {
    static const std::string version = grpc::Version();
    return version.c_str();
}

}  // extern "C"
