// The tree-walking evaluator behind renderChatTemplate, and the builtins
// (filters, tests, methods, globals) it calls. Internal to runtime/chat.
//
// Scopes follow jinja2's: a for-loop body gets a fresh scope each iteration
// (a `set` inside a loop is gone after it; use a namespace), a macro call
// gets a scope whose parent is the scope the macro was defined in, and `if`
// opens none.
#pragma once

#include "chat/ast.h"
#include "chat/chat_template.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace llmc::chat {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value *find(const std::string &name) const;
  void set(const std::string &name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

class Renderer {
public:
  explicit Renderer(const RenderOptions &options) : options_(options) {}
  ~Renderer();

  // Runs `body` with `globals` as the outermost scope; returns the text.
  std::string render(const Body &body, ScopePtr globals);

  // For builtins.
  Value callValue(const Value &callee, CallArgs &args);
  Value applyFilter(const std::string &name, const Value &input, CallArgs &args);
  bool applyTest(const std::string &name, const Value &input, CallArgs &args);
  Value getAttr(const Value &object, const std::string &name);
  Value getItem(const Value &object, const Value &key);
  void checkSize(const Value &v) const;
  void checkSize(size_t bytes) const;
  std::shared_ptr<Namespace> newNamespace(); // tracked, so that cycles through namespaces are broken at the end
  const RenderOptions &options() const { return options_; }
  // Calls a macro: binds its arguments in a fresh scope over its closure.
  Value callMacro(const Stmt &macro, const ScopePtr &closure, CallArgs &args);

private:
  enum class Flow { Normal, Break, Continue };

  const RenderOptions &options_;
  int64_t steps_ = 0;
  int64_t iterations_ = 0;
  int callDepth_ = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  std::vector<ScopePtr> macroScopes_; // scopes holding macros: cleared at the end (cycles)

  void step();
  void append(std::string &out, const std::string &text) const;
  Flow exec(const Body &body, const ScopePtr &scope, std::string &out);
  Flow execStmt(const Stmt &stmt, const ScopePtr &scope, std::string &out);
  Flow execFor(const Stmt &stmt, const ScopePtr &scope, std::string &out);
  void execCallBlock(const Stmt &stmt, const ScopePtr &scope, std::string &out);
  std::string capture(const Body &body, const ScopePtr &scope);
  Value applyFilterChain(const std::vector<ExprPtr> &filters, Value input, const ScopePtr &scope);
  void assign(const Target &target, const Value &value, Scope &scope);

  Value eval(const Expr &e, const ScopePtr &scope);
  Value evalInner(const Expr &e, const ScopePtr &scope);
  CallArgs evalArgs(const Expr &e, size_t first, const ScopePtr &scope);
  Value evalCompare(const Expr &e, const ScopePtr &scope);
  Value evalSlice(const Value &object, const Expr &slice, const ScopePtr &scope);
};

// builtins.cpp
Value binaryOp(Renderer &r, const std::string &op, const Value &a, const Value &b);
bool containsValue(const Value &container, const Value &needle);
std::vector<Value> iterate(const Value &v);
Value callMethod(Renderer &r, const Value &self, const std::string &name, CallArgs &args);
bool isMethodName(const Value &self, const std::string &name, bool &unsafe);
Value callFilter(Renderer &r, const std::string &name, const Value &input, CallArgs &args);
bool callTest(Renderer &r, const std::string &name, const Value &input, CallArgs &args);
void addGlobals(Scope &scope, const RenderOptions &options);
Value sliceValue(const Value &object, const Value &start, const Value &stop, const Value &step);
[[noreturn]] void failUndefined(const Value &undefined);

// A function object: a global (range, namespace, raise_exception, ...) or
// a bound method (`message.content.strip`).
class Function : public Object {
public:
  using Body = std::function<Value(Renderer &, CallArgs &)>;
  Function(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  std::string typeName() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool callable() const override { return true; }
  Value call(Renderer &renderer, CallArgs &args) override { return body_(renderer, args); }

private:
  std::string name_;
  Body body_;
};

// A macro, or the body of a {% call %} block standing as `caller`.
class Macro : public Object {
public:
  Macro(const Stmt &definition, ScopePtr closure)
      : def_(definition), closure_(std::move(closure)) {}
  std::string typeName() const override { return "Macro"; }
  std::string repr() const override;
  bool callable() const override { return true; }
  Value call(Renderer &renderer, CallArgs &args) override {
    return renderer.callMacro(def_, closure_, args);
  }

private:
  const Stmt &def_;
  ScopePtr closure_;
};

} // namespace llmc::chat
