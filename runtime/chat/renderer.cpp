// Statement execution and expression evaluation (see renderer.h for scoping).
#include "chat/renderer.h"

#include <algorithm>

namespace llmc::chat {

const Value *Scope::find(const std::string &name) const {
  for (const Scope *s = this; s; s = s->parent.get())
    for (const auto &[key, value] : s->vars)
      if (key == name)
        return &value;
  return nullptr;
}

void Scope::set(const std::string &name, Value value) {
  for (auto &[key, existing] : vars)
    if (key == name) {
      existing = std::move(value);
      return;
    }
  vars.emplace_back(name, std::move(value));
}

std::string Macro::repr() const { return "<Macro '" + (def_.kind == Stmt::Kind::Macro ? def_.text : "caller") + "'>"; }

namespace {

// `loop` inside a for body: one object per loop, advanced each iteration.
class LoopContext : public Object {
public:
  explicit LoopContext(std::shared_ptr<const std::vector<Value>> items) : items_(std::move(items)) {}
  size_t index = 0;

  std::string typeName() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index + 1) + "/" + std::to_string(items_->size()) + ">";
  }
  Value getAttr(const std::string &name) const override {
    int64_t n = int64_t(items_->size()), i = int64_t(index);
    if (name == "index")
      return Value::integer(i + 1);
    if (name == "index0")
      return Value::integer(i);
    if (name == "revindex")
      return Value::integer(n - i);
    if (name == "revindex0")
      return Value::integer(n - i - 1);
    if (name == "first")
      return Value::boolean(i == 0);
    if (name == "last")
      return Value::boolean(i == n - 1);
    if (name == "length")
      return Value::integer(n);
    if (name == "depth")
      return Value::integer(1);
    if (name == "depth0")
      return Value::integer(0);
    if (name == "previtem")
      return i > 0 ? (*items_)[size_t(i - 1)] : Value::undefined("there is no previous item");
    if (name == "nextitem")
      return i + 1 < n ? (*items_)[size_t(i + 1)] : Value::undefined("there is no next item");
    if (name == "cycle") {
      size_t at = index;
      return Value::object(std::make_shared<Function>("cycle", [at](Renderer &, CallArgs &args) {
        if (args.positional.empty())
          fail("no items for cycling given");
        return args.positional[at % args.positional.size()];
      }));
    }
    if (name == "changed") {
      auto self = const_cast<LoopContext *>(this);
      return Value::object(std::make_shared<Function>("changed", [self](Renderer &, CallArgs &args) {
        Value now = Value::list(args.positional);
        bool changed = !self->hasLast_ || !equals(now, self->last_);
        self->last_ = now;
        self->hasLast_ = true;
        return Value::boolean(changed);
      }));
    }
    return Object::getAttr(name);
  }

private:
  std::shared_ptr<const std::vector<Value>> items_;
  Value last_;
  bool hasLast_ = false;
};

ScopePtr childOf(const ScopePtr &parent) {
  auto scope = std::make_shared<Scope>();
  scope->parent = parent;
  return scope;
}

} // namespace

Renderer::~Renderer() {
  // Macros hold their defining scope and scopes hold macros; namespaces may
  // hold themselves. Clearing them frees the cycles.
  for (auto &scope : macroScopes_)
    scope->vars.clear();
  for (auto &ns : namespaces_)
    ns->attributes.entries.clear();
}

std::shared_ptr<Namespace> Renderer::newNamespace() {
  namespaces_.push_back(std::make_shared<Namespace>());
  return namespaces_.back();
}

void Renderer::step() {
  if (++steps_ > options_.limits.maxSteps)
    fail("the template ran more than " + std::to_string(options_.limits.maxSteps) +
         " steps (limits.maxSteps): it loops or recurses too much");
}

void Renderer::checkSize(size_t bytes) const {
  if (bytes > options_.limits.maxOutputBytes)
    fail("a value of " + std::to_string(bytes) + " bytes or items exceeds limits.maxOutputBytes (" +
         std::to_string(options_.limits.maxOutputBytes) + ")");
}

void Renderer::checkSize(const Value &v) const {
  if (v.isString())
    checkSize(v.str().size());
  else if (v.isList())
    checkSize(v.items().size());
}

void Renderer::append(std::string &out, const std::string &text) const {
  if (out.size() + text.size() > options_.limits.maxOutputBytes)
    fail("the rendering grows past " + std::to_string(options_.limits.maxOutputBytes) +
         " bytes (limits.maxOutputBytes)");
  out += text;
}

std::string Renderer::render(const Body &body, ScopePtr globals) {
  std::string out;
  exec(body, globals, out);
  return out;
}

Renderer::Flow Renderer::exec(const Body &body, const ScopePtr &scope, std::string &out) {
  for (const auto &stmt : body) {
    Flow flow = execStmt(*stmt, scope, out);
    if (flow != Flow::Normal)
      return flow;
  }
  return Flow::Normal;
}

std::string Renderer::capture(const Body &body, const ScopePtr &scope) {
  std::string out;
  exec(body, childOf(scope), out);
  return out;
}

Value Renderer::applyFilterChain(const std::vector<ExprPtr> &filters, Value input,
                                 const ScopePtr &scope) {
  for (const auto &filter : filters) {
    try {
      CallArgs args = evalArgs(*filter, 1, scope);
      input = applyFilter(filter->name, input, args);
    } catch (RenderError &e) {
      if (e.offset == SIZE_MAX)
        e.offset = filter->offset;
      throw;
    }
  }
  return input;
}

Renderer::Flow Renderer::execStmt(const Stmt &stmt, const ScopePtr &scope, std::string &out) {
  step();
  try {
    switch (stmt.kind) {
    case Stmt::Kind::Data:
      append(out, stmt.text);
      break;
    case Stmt::Kind::Print:
      append(out, toStr(eval(*stmt.expr, scope)));
      break;
    case Stmt::Kind::If:
      for (size_t i = 0; i < stmt.conditions.size(); ++i)
        if (truthy(eval(*stmt.conditions[i], scope)))
          return exec(stmt.bodies[i], scope, out);
      return exec(stmt.elseBody, scope, out);
    case Stmt::Kind::For:
      return execFor(stmt, scope, out);
    case Stmt::Kind::Set:
      assign(stmt.target, eval(*stmt.expr, scope), *scope);
      break;
    case Stmt::Kind::SetBlock:
      assign(stmt.target,
             applyFilterChain(stmt.filters, Value::string(capture(stmt.body, scope)), scope), *scope);
      break;
    case Stmt::Kind::Macro:
      scope->set(stmt.text, Value::object(std::make_shared<Macro>(stmt, scope)));
      macroScopes_.push_back(scope);
      break;
    case Stmt::Kind::CallBlock:
      execCallBlock(stmt, scope, out);
      break;
    case Stmt::Kind::FilterBlock:
      append(out, toStr(applyFilterChain(stmt.filters, Value::string(capture(stmt.body, scope)),
                                         scope)));
      break;
    case Stmt::Kind::With: {
      std::vector<Value> values;
      for (const auto &value : stmt.values)
        values.push_back(eval(*value, scope));
      ScopePtr inner = childOf(scope);
      for (size_t i = 0; i < values.size(); ++i)
        assign(stmt.targets[i], values[i], *inner);
      return exec(stmt.body, inner, out);
    }
    case Stmt::Kind::Scope:
      exec(stmt.body, childOf(scope), out);
      break;
    case Stmt::Kind::Break:
      return Flow::Break;
    case Stmt::Kind::Continue:
      return Flow::Continue;
    }
  } catch (RenderError &e) {
    if (e.offset == SIZE_MAX)
      e.offset = stmt.offset;
    throw;
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::execFor(const Stmt &stmt, const ScopePtr &scope, std::string &out) {
  std::vector<Value> all = iterate(eval(*stmt.expr, scope));
  auto items = std::make_shared<std::vector<Value>>();
  auto countIteration = [this] {
    if (++iterations_ > options_.limits.maxLoopIterations)
      fail("for loops ran more than " + std::to_string(options_.limits.maxLoopIterations) +
           " iterations in one rendering (limits.maxLoopIterations)");
  };
  if (stmt.filter) {
    for (Value &item : all) {
      countIteration();
      ScopePtr probe = childOf(scope);
      assign(stmt.target, item, *probe);
      if (truthy(eval(*stmt.filter, probe)))
        items->push_back(std::move(item));
    }
  } else {
    *items = std::move(all);
  }
  if (items->empty())
    return exec(stmt.elseBody, childOf(scope), out);
  auto loop = std::make_shared<LoopContext>(items);
  Value loopValue = Value::object(loop);
  for (size_t i = 0; i < items->size(); ++i) {
    countIteration();
    loop->index = i;
    ScopePtr inner = childOf(scope);
    assign(stmt.target, (*items)[i], *inner);
    inner->set("loop", loopValue);
    if (exec(stmt.body, inner, out) == Flow::Break)
      break;
  }
  return Flow::Normal;
}

void Renderer::execCallBlock(const Stmt &stmt, const ScopePtr &scope, std::string &out) {
  const Expr &call = *stmt.expr;
  Value callee = eval(*call.children[0], scope);
  CallArgs args = evalArgs(call, 1, scope);
  args.keyword.emplace_back("caller", Value::object(std::make_shared<Macro>(stmt, scope)));
  append(out, toStr(callValue(callee, args)));
}

Value Renderer::callMacro(const Stmt &macro, const ScopePtr &closure, CallArgs &args) {
  const std::string name = macro.kind == Stmt::Kind::Macro ? macro.text : "caller";
  if (callDepth_ >= options_.limits.maxCallDepth)
    fail("macro calls nest deeper than " + std::to_string(options_.limits.maxCallDepth) +
         " (limits.maxCallDepth): runaway recursion in '" + name + "'?");
  ScopePtr scope = childOf(closure);
  const auto &params = macro.params;
  std::vector<bool> bound(params.size(), false);
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      scope->set(params[i].name, args.positional[i]);
      bound[i] = true;
    } else if (macro.usesVarargs) {
      varargs.push_back(args.positional[i]);
    } else {
      fail("macro '" + name + "' takes not more than " + std::to_string(params.size()) +
           " argument(s)");
    }
  }
  DictData kwargs;
  Value caller = Value::undefined("No caller defined");
  for (auto &keyword : args.keyword) {
    const std::string &key = keyword.first;
    const Value &value = keyword.second;
    auto it = std::find_if(params.begin(), params.end(), [&](const MacroParam &p) { return p.name == key; });
    if (it != params.end()) {
      size_t i = size_t(it - params.begin());
      if (bound[i])
        fail("macro '" + name + "' got multiple values for argument '" + key + "'");
      scope->set(key, value);
      bound[i] = true;
    } else if (key == "caller" && macro.usesCaller) {
      caller = value;
    } else if (macro.usesKwargs) {
      kwargs.set(Value::string(key), value);
    } else {
      fail("macro '" + name + "' takes no keyword argument '" + key + "'");
    }
  }
  for (size_t i = 0; i < params.size(); ++i)
    if (!bound[i])
      scope->set(params[i].name, params[i].fallback
                                     ? eval(*params[i].fallback, scope)
                                     : Value::undefined("parameter '" + params[i].name +
                                                        "' was not provided"));
  if (macro.usesVarargs)
    scope->set("varargs", Value::list(std::move(varargs), true));
  if (macro.usesKwargs)
    scope->set("kwargs", Value::dict(std::move(kwargs)));
  if (macro.usesCaller)
    scope->set("caller", caller);
  ++callDepth_;
  std::string out;
  try {
    exec(macro.body, scope, out);
  } catch (...) {
    --callDepth_;
    throw;
  }
  --callDepth_;
  return Value::string(std::move(out));
}

void Renderer::assign(const Target &target, const Value &value, Scope &scope) {
  switch (target.kind) {
  case Target::Kind::Name:
    scope.set(target.name, value);
    return;
  case Target::Kind::Attribute: {
    const Value *ns = scope.find(target.name);
    Namespace *object = ns && ns->isObject() ? dynamic_cast<Namespace *>(ns->object()) : nullptr;
    if (!object)
      throw RenderError{"cannot assign attribute '" + target.attribute + "' on non-namespace object '" +
                            target.name + "' (create it with {% set " + target.name +
                            " = namespace() %})",
                        target.offset};
    object->attributes.set(Value::string(target.attribute), value);
    return;
  }
  case Target::Kind::Tuple: {
    std::vector<Value> items = iterate(value);
    if (items.size() != target.items.size())
      throw RenderError{items.size() < target.items.size()
                            ? "not enough values to unpack (expected " +
                                  std::to_string(target.items.size()) + ", got " +
                                  std::to_string(items.size()) + ")"
                            : "too many values to unpack (expected " +
                                  std::to_string(target.items.size()) + ")",
                        target.offset};
    for (size_t i = 0; i < items.size(); ++i)
      assign(target.items[i], items[i], scope);
    return;
  }
  }
}

// ---- expressions -------------------------------------------------------------

Value Renderer::eval(const Expr &e, const ScopePtr &scope) {
  step();
  try {
    return evalInner(e, scope);
  } catch (RenderError &error) {
    if (error.offset == SIZE_MAX)
      error.offset = e.offset;
    throw;
  }
}

CallArgs Renderer::evalArgs(const Expr &e, size_t first, const ScopePtr &scope) {
  CallArgs args;
  for (size_t i = first; i < e.children.size(); ++i)
    args.positional.push_back(eval(*e.children[i], scope));
  for (const auto &[key, value] : e.keywords)
    args.keyword.emplace_back(key, eval(*value, scope));
  if (e.starArgs)
    for (Value &v : iterate(eval(*e.starArgs, scope)))
      args.positional.push_back(std::move(v));
  if (e.starKwargs) {
    Value kw = eval(*e.starKwargs, scope);
    if (!kw.isDict())
      fail("argument after ** must be a mapping, not " + typeName(kw));
    for (const auto &[key, value] : kw.dict().entries)
      args.keyword.emplace_back(toStr(key), value);
  }
  return args;
}

Value Renderer::callValue(const Value &callee, CallArgs &args) {
  if (callee.isObject() && callee.object()->callable())
    return callee.object()->call(*this, args);
  if (callee.isUndefined())
    failUndefined(callee);
  fail("'" + typeName(callee) + "' object is not callable");
}

Value Renderer::applyFilter(const std::string &name, const Value &input, CallArgs &args) {
  Value v = callFilter(*this, name, input, args);
  checkSize(v);
  return v;
}

bool Renderer::applyTest(const std::string &name, const Value &input, CallArgs &args) {
  return callTest(*this, name, input, args);
}

namespace {
std::string objectTypeRepr(const Value &v) {
  if (v.isNone())
    return "None";
  if (v.isObject() && v.object()->typeName() == "Namespace")
    return "jinja2.utils.Namespace object";
  return typeName(v) + " object";
}
} // namespace

Value Renderer::getAttr(const Value &object, const std::string &name) {
  if (object.isUndefined())
    failUndefined(object);
  if (object.isObject()) {
    Value v = object.object()->getAttr(name);
    return v;
  }
  bool unsafe = false;
  if (isMethodName(object, name, unsafe)) {
    if (unsafe)
      return Value::undefined("access to attribute '" + name + "' of '" + typeName(object) +
                                  "' object is unsafe.",
                              true);
    Value self = object;
    return Value::object(std::make_shared<Function>(name, [self, name](Renderer &r, CallArgs &args) {
      return callMethod(r, self, name, args);
    }));
  }
  if (object.isDict())
    if (const Value *v = object.dict().find(name))
      return *v;
  return Value::undefined("'" + objectTypeRepr(object) + "' has no attribute '" + name + "'");
}

Value Renderer::getItem(const Value &object, const Value &key) {
  if (object.isUndefined())
    failUndefined(object);
  if (object.isDict()) {
    if (key.isList() && !key.isTuple())
      fail("unhashable type: 'list'");
    if (const Value *v = object.dict().find(key))
      return *v;
  } else if ((object.isList() || object.isString()) && (key.isInt() || key.isBool())) {
    int64_t i = key.asInt();
    if (object.isList()) {
      int64_t n = int64_t(object.items().size());
      if (i < 0)
        i += n;
      if (i >= 0 && i < n)
        return object.items()[size_t(i)];
    } else {
      std::u32string text = decodeUtf8(object.str());
      int64_t n = int64_t(text.size());
      if (i < 0)
        i += n;
      if (i >= 0 && i < n)
        return Value::string(encodeUtf8(text.substr(size_t(i), 1)));
    }
  }
  if (key.isString())
    return getAttr(object, key.str());
  return Value::undefined(objectTypeRepr(object) + " has no element " + repr(key));
}

Value Renderer::evalSlice(const Value &object, const Expr &slice, const ScopePtr &scope) {
  Value parts[3];
  for (int i = 0; i < 3; ++i)
    parts[i] = slice.children[size_t(i)] ? eval(*slice.children[size_t(i)], scope) : Value::none();
  return sliceValue(object, parts[0], parts[1], parts[2]);
}

Value Renderer::evalCompare(const Expr &e, const ScopePtr &scope) {
  Value left = eval(*e.children[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.children[i + 1], scope);
    const std::string &op = e.ops[i];
    bool result;
    if (op == "==")
      result = equals(left, right);
    else if (op == "!=")
      result = !equals(left, right);
    else if (op == "in")
      result = containsValue(right, left);
    else if (op == "not in")
      result = !containsValue(right, left);
    else {
      if (left.isUndefined())
        failUndefined(left);
      if (right.isUndefined())
        failUndefined(right);
      int c;
      try {
        c = compare(left, right);
      } catch (RenderError &error) {
        error.message = "'" + op + "' not supported between instances of '" + typeName(left) +
                        "' and '" + typeName(right) + "'";
        throw;
      }
      result = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!result)
      return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Renderer::evalInner(const Expr &e, const ScopePtr &scope) {
  switch (e.kind) {
  case Expr::Kind::Const:
    return e.constant;
  case Expr::Kind::Name:
    if (const Value *v = scope->find(e.name))
      return *v;
    return Value::undefined("'" + e.name + "' is undefined");
  case Expr::Kind::List:
  case Expr::Kind::Tuple: {
    std::vector<Value> items;
    for (const auto &child : e.children)
      items.push_back(eval(*child, scope));
    return Value::list(std::move(items), e.kind == Expr::Kind::Tuple);
  }
  case Expr::Kind::Dict: {
    DictData dict;
    for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
      Value key = eval(*e.children[i], scope);
      if (key.isDict() || (key.isList() && !key.isTuple()))
        throw RenderError{"unhashable type: '" + typeName(key) + "'", e.children[i]->offset};
      dict.set(std::move(key), eval(*e.children[i + 1], scope));
    }
    return Value::dict(std::move(dict));
  }
  case Expr::Kind::Getattr:
    return getAttr(eval(*e.children[0], scope), e.name);
  case Expr::Kind::Getitem: {
    Value object = eval(*e.children[0], scope);
    const Expr &index = *e.children[1];
    if (index.kind == Expr::Kind::Slice) {
      if (object.isUndefined())
        failUndefined(object);
      return evalSlice(object, index, scope);
    }
    return getItem(object, eval(index, scope));
  }
  case Expr::Kind::Slice:
    fail("a slice outside a subscript");
  case Expr::Kind::Call: {
    Value callee = eval(*e.children[0], scope);
    CallArgs args = evalArgs(e, 1, scope);
    Value result = callValue(callee, args);
    checkSize(result);
    return result;
  }
  case Expr::Kind::Filter: {
    Value input = eval(*e.children[0], scope);
    CallArgs args = evalArgs(e, 1, scope);
    return applyFilter(e.name, input, args);
  }
  case Expr::Kind::Test: {
    Value input = eval(*e.children[0], scope);
    CallArgs args = evalArgs(e, 1, scope);
    return Value::boolean(applyTest(e.name, input, args));
  }
  case Expr::Kind::Neg:
  case Expr::Kind::Pos: {
    Value v = eval(*e.children[0], scope);
    if (v.isUndefined())
      failUndefined(v);
    if (!v.isNumber())
      fail(std::string("bad operand type for unary ") + (e.kind == Expr::Kind::Neg ? "-" : "+") +
           ": '" + typeName(v) + "'");
    if (e.kind == Expr::Kind::Pos)
      return v.isBool() ? Value::integer(v.asInt()) : v;
    if (v.isFloat())
      return Value::real(-v.asFloat());
    if (v.asInt() == INT64_MIN)
      fail("integer overflow");
    return Value::integer(-v.asInt());
  }
  case Expr::Kind::Not:
    return Value::boolean(!truthy(eval(*e.children[0], scope)));
  case Expr::Kind::Binary: {
    Value left = eval(*e.children[0], scope);
    Value right = eval(*e.children[1], scope);
    Value result = binaryOp(*this, e.name, left, right);
    checkSize(result);
    return result;
  }
  case Expr::Kind::And: {
    Value left = eval(*e.children[0], scope);
    return truthy(left) ? eval(*e.children[1], scope) : left;
  }
  case Expr::Kind::Or: {
    Value left = eval(*e.children[0], scope);
    return truthy(left) ? left : eval(*e.children[1], scope);
  }
  case Expr::Kind::Compare:
    return evalCompare(e, scope);
  case Expr::Kind::CondExpr:
    if (truthy(eval(*e.children[0], scope)))
      return eval(*e.children[1], scope);
    if (e.children[2])
      return eval(*e.children[2], scope);
    return Value::undefined("the inline if expression evaluated to false and no else section "
                            "was defined");
  }
  fail("unknown expression");
}

} // namespace llmc::chat
