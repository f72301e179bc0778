#include "transport/routed.h"

#include <cctype>

#include "core/error.h"

namespace hetccl {
namespace {

bool known(const std::string& t) {
  return t == "auto" || t == "shm" || t == "tcp" || t == "ucx" || t == "ofi" || t == "net";
}

std::string errorText(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

TransportChoice parseTransportChoice(const std::string& given, const char* what) {
  TransportChoice c;
  std::string text = given;  // names match in any case, as the other choices do
  for (char& ch : text) ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
  auto bad = [&](const std::string& why) {
    throwError(
        hetcclInvalidArgument,
        std::string(what) + "='" + given + "': " + why +
            " (auto, shm, tcp, ucx, ofi, net, or intra=<auto|shm|tcp|ucx|ofi|net>,inter=<auto|tcp|ucx|ofi|net>)");
  };
  if (text.find('=') == std::string::npos) {
    if (!known(text)) bad("unknown transport");
    c.intra = c.inter = text;  // one transport for every link (shm: every rank must be on one host)
    return c;
  }
  size_t at = 0;
  bool sawIntra = false, sawInter = false;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) bad("'" + item + "' is not class=transport");
    const std::string cls = item.substr(0, eq), name = item.substr(eq + 1);
    if (!known(name)) bad("unknown transport '" + name + "'");
    if (cls == "intra" && !sawIntra) {
      c.intra = name;
      sawIntra = true;
    } else if (cls == "inter" && !sawInter) {
      if (name == "shm") bad("shm cannot reach another host");
      c.inter = name;
      sawInter = true;
    } else {
      bad("'" + cls + "' is not a link class or is given twice (intra: peers on this host, inter: on others)");
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return c;
}

RoutedTransport::RoutedTransport(std::unique_ptr<Transport> intra, std::unique_ptr<Transport> inter,
                                 std::vector<uint8_t> remoteHost)
    : intra_(std::move(intra)), inter_(std::move(inter)), remote_(std::move(remoteHost)) {
  name_ = std::string(intra_->name()) + "+" + inter_->name();
  thread_ = std::thread([this] { worker(); });
}

RoutedTransport::~RoutedTransport() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RoutedTransport::worker() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return posted_ || stop_; });
    if (stop_) return;
    posted_ = false;
    lk.unlock();
    std::exception_ptr err;
    try {
      inter_->run(far_);
    } catch (...) {
      err = std::current_exception();
      intra_->poison(errorText(err));  // the caller's part would otherwise wait to its timeout
    }
    lk.lock();
    farError_ = err;
    finished_ = true;
    cv_.notify_all();
  }
}

void RoutedTransport::run(std::span<Xfer> xfers) {
  local_.clear();
  far_.clear();
  for (const Xfer& x : xfers)
    (x.peer >= 0 && static_cast<size_t>(x.peer) < remote_.size() && remote_[x.peer] ? far_ : local_).push_back(x);
  if (far_.empty()) return intra_->run(xfers);
  if (local_.empty()) return inter_->run(xfers);
  {
    std::lock_guard<std::mutex> g(mu_);
    finished_ = false;
    farError_ = nullptr;
    posted_ = true;
  }
  cv_.notify_all();
  std::exception_ptr localError;
  try {
    intra_->run(local_);
  } catch (...) {
    localError = std::current_exception();
    inter_->poison(errorText(localError));
  }
  std::exception_ptr farError;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return finished_; });
    farError = farError_;
  }
  if (localError) std::rethrow_exception(localError);
  if (farError) std::rethrow_exception(farError);
}

void RoutedTransport::drain() {
  intra_->drain();
  inter_->drain();
}

void RoutedTransport::forgetLazy() {
  intra_->forgetLazy();
  inter_->forgetLazy();
}

void RoutedTransport::poison(const std::string& why) {
  intra_->poison(why);
  inter_->poison(why);
}

}  // namespace hetccl
