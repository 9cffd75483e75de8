// A recursive-descent parser for jinja2's grammar, with jinja2's operator
// precedence (lowest first):
//   inline if  <  or  <  and  <  not  <  comparisons, in, not in  <  + -
//   <  ~  <  * / // %  <  **  <  unary - +  <  filters |, tests is, calls
//   <  primaries with .attr, [subscript], (call)
// Like jinja2, ** is left-associative and a filter binds tighter than any
// arithmetic (a + b|length is a + (b|length)).
#include "chat/ast.h"

#include <initializer_list>

namespace llmc::chat {
namespace {

constexpr int kMaxNesting = 200;

class Parser {
public:
  explicit Parser(const std::vector<Token> &tokens) : tokens_(tokens) {}

  Body parseAll() {
    Body body = subparse({});
    if (current().kind != TokenKind::End)
      fail("unexpected tag", current().offset);
    return body;
  }

private:
  const std::vector<Token> &tokens_;
  size_t index_ = 0;
  int depth_ = 0;
  int loopDepth_ = 0;
  std::vector<Stmt *> macros_; // macros being parsed (innermost last)
  std::vector<std::string> openBlocks_; // for end-of-template messages

  struct DepthGuard {
    Parser &p;
    DepthGuard(Parser &parser, size_t offset) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        p.fail("the template nests expressions or blocks deeper than " +
                   std::to_string(kMaxNesting) + " levels",
               offset);
    }
    ~DepthGuard() { --p.depth_; }
  };

  [[noreturn]] void fail(std::string message, size_t offset) const {
    throw RenderError{std::move(message), offset};
  }

  const Token &current() const { return tokens_[index_]; }
  const Token &look() const { return tokens_[std::min(index_ + 1, tokens_.size() - 1)]; }
  const Token &next() {
    const Token &t = tokens_[index_];
    if (index_ + 1 < tokens_.size())
      ++index_;
    return t;
  }

  static std::string describe(const Token &t) {
    switch (t.kind) {
    case TokenKind::Data:
      return "template data";
    case TokenKind::VariableBegin:
      return "'{{'";
    case TokenKind::VariableEnd:
      return "end of print statement '}}'";
    case TokenKind::BlockBegin:
      return "'{%'";
    case TokenKind::BlockEnd:
      return "end of statement block '%}'";
    case TokenKind::Name:
    case TokenKind::Integer:
    case TokenKind::Float:
    case TokenKind::Operator:
      return "'" + t.text + "'";
    case TokenKind::String:
      return "string " + pyStringRepr(t.text);
    case TokenKind::End:
      return "end of template";
    }
    return "token";
  }

  bool isOp(const char *op) const {
    return current().kind == TokenKind::Operator && current().text == op;
  }
  bool isName(const char *name) const {
    return current().kind == TokenKind::Name && current().text == name;
  }
  bool skipOp(const char *op) {
    if (!isOp(op))
      return false;
    next();
    return true;
  }
  bool skipName(const char *name) {
    if (!isName(name))
      return false;
    next();
    return true;
  }
  void expectOp(const char *op) {
    if (!skipOp(op))
      fail(std::string("expected '") + op + "', got " + describe(current()), current().offset);
  }
  const Token &expectName() {
    if (current().kind != TokenKind::Name)
      fail("expected a name, got " + describe(current()), current().offset);
    return next();
  }
  void expectKind(TokenKind kind, const char *what) {
    if (current().kind != kind)
      fail(std::string("expected ") + what + ", got " + describe(current()), current().offset);
    next();
  }
  void expectBlockEnd() { expectKind(TokenKind::BlockEnd, "end of statement block '%}'"); }

  // ---- statements --------------------------------------------------------

  Body subparse(std::initializer_list<const char *> endNames) {
    Body body;
    while (true) {
      const Token &t = current();
      switch (t.kind) {
      case TokenKind::Data: {
        auto data = std::make_unique<Stmt>(Stmt::Kind::Data, t.offset);
        data->text = t.text;
        body.push_back(std::move(data));
        next();
        break;
      }
      case TokenKind::VariableBegin: {
        next();
        auto print = std::make_unique<Stmt>(Stmt::Kind::Print, t.offset);
        print->expr = parseTuple(false, true, {});
        expectKind(TokenKind::VariableEnd, "end of print statement '}}'");
        body.push_back(std::move(print));
        break;
      }
      case TokenKind::BlockBegin: {
        next();
        if (current().kind == TokenKind::Name)
          for (const char *end : endNames)
            if (current().text == end)
              return body;
        body.push_back(parseStatement());
        expectBlockEnd();
        break;
      }
      case TokenKind::End:
        if (endNames.size() != 0) {
          std::string expected;
          for (const char *end : endNames)
            expected += std::string(expected.empty() ? "" : " or ") + "'" + end + "'";
          fail("unexpected end of template: looking for " + expected + " to close the '" +
                   openBlocks_.back() + "' block",
               t.offset);
        }
        return body;
      default:
        fail("unexpected " + describe(t), t.offset);
      }
    }
  }

  // After a statement's header: `%}`, then the body up to one of `endNames`
  // (left as the current token, or consumed when `dropEnd`).
  Body parseStatements(std::initializer_list<const char *> endNames, bool dropEnd) {
    skipOp(":");
    expectBlockEnd();
    Body body = subparse(endNames);
    if (dropEnd)
      next();
    return body;
  }

  StmtPtr parseStatement() {
    const Token &t = current();
    if (t.kind != TokenKind::Name)
      fail("expected a statement name after '{%', got " + describe(t), t.offset);
    DepthGuard guard(*this, t.offset);
    const std::string &name = t.text;
    openBlocks_.push_back(name);
    StmtPtr stmt;
    if (name == "if")
      stmt = parseIf();
    else if (name == "for")
      stmt = parseFor();
    else if (name == "set")
      stmt = parseSet();
    else if (name == "macro")
      stmt = parseMacro();
    else if (name == "call")
      stmt = parseCallBlock();
    else if (name == "filter")
      stmt = parseFilterBlock();
    else if (name == "with")
      stmt = parseWith();
    else if (name == "generation")
      stmt = parseGeneration();
    else if (name == "break" || name == "continue")
      stmt = parseLoopControl();
    else
      fail(unknownTagMessage(name), t.offset);
    openBlocks_.pop_back();
    return stmt;
  }

  static std::string unknownTagMessage(const std::string &name) {
    static const char *const ends[] = {"endif", "endfor", "endset", "endmacro", "endcall",
                                       "endfilter", "endwith", "endgeneration", "elif", "else",
                                       "endraw"};
    for (const char *end : ends)
      if (name == end)
        return "unexpected '" + name + "': no open block here takes it";
    if (name == "include" || name == "import" || name == "from" || name == "extends" ||
        name == "block")
      return "'" + name + "' is not supported: a chat template renders alone, without other "
                          "templates";
    if (name == "do")
      return "unknown tag 'do': transformers does not enable the do extension (use "
             "{% set ns.x = ... %} instead)";
    return "unknown tag '" + name + "'";
  }

  StmtPtr parseIf() {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::If, next().offset);
    stmt->conditions.push_back(parseTuple(false, false, {}));
    stmt->bodies.push_back(parseStatements({"elif", "else", "endif"}, false));
    while (true) {
      const Token &t = next();
      if (t.text == "elif") {
        stmt->conditions.push_back(parseTuple(false, false, {}));
        stmt->bodies.push_back(parseStatements({"elif", "else", "endif"}, false));
      } else if (t.text == "else") {
        stmt->elseBody = parseStatements({"endif"}, true);
        break;
      } else {
        break; // endif
      }
    }
    return stmt;
  }

  StmtPtr parseFor() {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::For, next().offset);
    stmt->target = parseAssignTarget(true, false, {"in"}, false);
    if (!skipName("in"))
      fail("expected 'in' in the for statement, got " + describe(current()), current().offset);
    stmt->expr = parseTuple(false, false, {"recursive"});
    if (skipName("if"))
      stmt->filter = parseExpression(true);
    if (isName("recursive"))
      fail("recursive for loops are not supported", current().offset);
    ++loopDepth_;
    stmt->body = parseStatements({"endfor", "else"}, false);
    --loopDepth_;
    if (next().text == "else")
      stmt->elseBody = parseStatements({"endfor"}, true);
    return stmt;
  }

  StmtPtr parseSet() {
    size_t offset = next().offset;
    Target target = parseAssignTarget(true, false, {}, true);
    if (skipOp("=")) {
      auto stmt = std::make_unique<Stmt>(Stmt::Kind::Set, offset);
      stmt->target = std::move(target);
      stmt->expr = parseTuple(false, true, {});
      return stmt;
    }
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::SetBlock, offset);
    stmt->target = std::move(target);
    stmt->filters = parseFilterChain(false);
    stmt->body = parseStatements({"endset"}, true);
    return stmt;
  }

  void parseSignature(Stmt &stmt) {
    expectOp("(");
    while (!isOp(")")) {
      if (!stmt.params.empty())
        expectOp(",");
      MacroParam param;
      param.name = expectName().text;
      if (skipOp("="))
        param.fallback = parseExpression(true);
      else if (!stmt.params.empty() && stmt.params.back().fallback)
        fail("non-default argument '" + param.name + "' follows default argument",
             current().offset);
      stmt.params.push_back(std::move(param));
    }
    expectOp(")");
  }

  // A macro or caller body: its own loop context, and it notes whether it
  // reads varargs, kwargs or caller.
  Body parseCallableBody(Stmt &stmt, const char *endName) {
    int savedLoopDepth = loopDepth_;
    loopDepth_ = 0;
    macros_.push_back(&stmt);
    Body body = parseStatements({endName}, true);
    macros_.pop_back();
    loopDepth_ = savedLoopDepth;
    return body;
  }

  StmtPtr parseMacro() {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::Macro, next().offset);
    stmt->text = expectName().text;
    parseSignature(*stmt);
    stmt->body = parseCallableBody(*stmt, "endmacro");
    return stmt;
  }

  StmtPtr parseCallBlock() {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::CallBlock, next().offset);
    if (isOp("("))
      parseSignature(*stmt);
    size_t at = current().offset;
    stmt->expr = parseExpression(true);
    if (stmt->expr->kind != Expr::Kind::Call)
      fail("expected a macro call after 'call'", at);
    stmt->body = parseCallableBody(*stmt, "endcall");
    return stmt;
  }

  StmtPtr parseFilterBlock() {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::FilterBlock, next().offset);
    stmt->filters = parseFilterChain(true);
    stmt->body = parseStatements({"endfilter"}, true);
    return stmt;
  }

  StmtPtr parseWith() {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::With, next().offset);
    while (current().kind != TokenKind::BlockEnd) {
      if (!stmt->targets.empty())
        expectOp(",");
      stmt->targets.push_back(parseAssignTarget(true, false, {}, false));
      expectOp("=");
      stmt->values.push_back(parseExpression(true));
    }
    stmt->body = parseStatements({"endwith"}, true);
    return stmt;
  }

  StmtPtr parseGeneration() {
    auto stmt = std::make_unique<Stmt>(Stmt::Kind::Scope, next().offset);
    stmt->body = parseStatements({"endgeneration"}, true);
    return stmt;
  }

  StmtPtr parseLoopControl() {
    const Token &t = next();
    if (loopDepth_ == 0)
      fail("'" + t.text + "' outside a for loop", t.offset);
    return std::make_unique<Stmt>(t.text == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue,
                                  t.offset);
  }

  Target toTarget(const Expr &e) const {
    Target target;
    target.offset = e.offset;
    if (e.kind == Expr::Kind::Name) {
      target.name = e.name;
      return target;
    }
    if (e.kind == Expr::Kind::Tuple) {
      target.kind = Target::Kind::Tuple;
      for (const auto &item : e.children)
        target.items.push_back(toTarget(*item));
      return target;
    }
    fail("cannot assign to this expression (only names, tuples of names and namespace "
         "attributes can be assigned)",
         e.offset);
  }

  Target parseAssignTarget(bool withTuple, bool nameOnly, std::initializer_list<const char *> extraEnds,
                           bool withNamespace) {
    if (withNamespace && current().kind == TokenKind::Name && look().kind == TokenKind::Operator &&
        look().text == ".") {
      Target target;
      target.kind = Target::Kind::Attribute;
      target.offset = current().offset;
      target.name = next().text;
      next();
      target.attribute = expectName().text;
      return target;
    }
    if (nameOnly) {
      Target target;
      target.offset = current().offset;
      target.name = expectName().text;
      return target;
    }
    ExprPtr e = withTuple ? parseTuple(true, true, extraEnds) : parsePrimary();
    return toTarget(*e);
  }

  // ---- expressions ---------------------------------------------------------

  bool isTupleEnd(std::initializer_list<const char *> extraEnds) const {
    const Token &t = current();
    if (t.kind == TokenKind::VariableEnd || t.kind == TokenKind::BlockEnd ||
        (t.kind == TokenKind::Operator && t.text == ")"))
      return true;
    if (t.kind == TokenKind::Name)
      for (const char *end : extraEnds)
        if (t.text == end)
          return true;
    return false;
  }

  ExprPtr parseTuple(bool simplified, bool withCondExpr, std::initializer_list<const char *> extraEnds,
                     bool explicitParentheses = false) {
    size_t offset = current().offset;
    std::vector<ExprPtr> items;
    bool isTuple = false;
    while (true) {
      if (!items.empty())
        expectOp(",");
      if (isTupleEnd(extraEnds))
        break;
      items.push_back(simplified ? parsePrimary() : parseExpression(withCondExpr));
      if (isOp(","))
        isTuple = true;
      else
        break;
    }
    if (!isTuple) {
      if (!items.empty())
        return std::move(items[0]);
      if (!explicitParentheses)
        fail("expected an expression, got " + describe(current()), current().offset);
    }
    auto tuple = std::make_unique<Expr>(Expr::Kind::Tuple, offset);
    tuple->children = std::move(items);
    return tuple;
  }

  ExprPtr parseExpression(bool withCondExpr) {
    DepthGuard guard(*this, current().offset);
    return withCondExpr ? parseCondExpr() : parseOr();
  }

  ExprPtr parseCondExpr() {
    ExprPtr expr = parseOr();
    while (isName("if")) {
      size_t offset = next().offset;
      auto cond = std::make_unique<Expr>(Expr::Kind::CondExpr, offset);
      ExprPtr test = parseOr();
      ExprPtr otherwise;
      if (skipName("else"))
        otherwise = parseCondExpr();
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(expr));
      cond->children.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right, size_t offset) {
    auto e = std::make_unique<Expr>(kind, offset);
    e->name = std::move(op);
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  ExprPtr parseOr() {
    ExprPtr left = parseAnd();
    while (isName("or")) {
      size_t offset = next().offset;
      left = binary(Expr::Kind::Or, "or", std::move(left), parseAnd(), offset);
    }
    return left;
  }

  ExprPtr parseAnd() {
    ExprPtr left = parseNot();
    while (isName("and")) {
      size_t offset = next().offset;
      left = binary(Expr::Kind::And, "and", std::move(left), parseNot(), offset);
    }
    return left;
  }

  ExprPtr parseNot() {
    if (isName("not")) {
      DepthGuard guard(*this, current().offset);
      auto e = std::make_unique<Expr>(Expr::Kind::Not, next().offset);
      e->children.push_back(parseNot());
      return e;
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    size_t offset = current().offset;
    ExprPtr first = parseMath1();
    auto compare = std::make_unique<Expr>(Expr::Kind::Compare, offset);
    compare->children.push_back(std::move(first));
    while (true) {
      const Token &t = current();
      if (t.kind == TokenKind::Operator &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" ||
           t.text == ">=")) {
        compare->ops.push_back(next().text);
      } else if (isName("in")) {
        next();
        compare->ops.push_back("in");
      } else if (isName("not") && look().kind == TokenKind::Name && look().text == "in") {
        next();
        next();
        compare->ops.push_back("not in");
      } else {
        break;
      }
      compare->children.push_back(parseMath1());
    }
    if (compare->ops.empty())
      return std::move(compare->children[0]);
    return compare;
  }

  ExprPtr parseMath1() {
    ExprPtr left = parseConcat();
    while (isOp("+") || isOp("-")) {
      const Token &op = next();
      left = binary(Expr::Kind::Binary, op.text, std::move(left), parseConcat(), op.offset);
    }
    return left;
  }

  ExprPtr parseConcat() {
    ExprPtr left = parseMath2();
    while (isOp("~")) {
      const Token &op = next();
      left = binary(Expr::Kind::Binary, "~", std::move(left), parseMath2(), op.offset);
    }
    return left;
  }

  ExprPtr parseMath2() {
    ExprPtr left = parsePow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      const Token &op = next();
      left = binary(Expr::Kind::Binary, op.text, std::move(left), parsePow(), op.offset);
    }
    return left;
  }

  ExprPtr parsePow() {
    ExprPtr left = parseUnary(true);
    while (isOp("**")) {
      const Token &op = next();
      left = binary(Expr::Kind::Binary, "**", std::move(left), parseUnary(true), op.offset);
    }
    return left;
  }

  ExprPtr parseUnary(bool withFilter) {
    DepthGuard guard(*this, current().offset);
    ExprPtr node;
    if (isOp("-") || isOp("+")) {
      const Token &op = next();
      node = std::make_unique<Expr>(op.text == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, op.offset);
      node->children.push_back(parseUnary(false));
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(std::move(node));
    if (withFilter)
      node = parseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr constant(Value v, size_t offset) {
    auto e = std::make_unique<Expr>(Expr::Kind::Const, offset);
    e->constant = std::move(v);
    return e;
  }

  ExprPtr parsePrimary() {
    const Token &t = current();
    DepthGuard guard(*this, t.offset);
    switch (t.kind) {
    case TokenKind::Name: {
      next();
      if (t.text == "true" || t.text == "True")
        return constant(Value::boolean(true), t.offset);
      if (t.text == "false" || t.text == "False")
        return constant(Value::boolean(false), t.offset);
      if (t.text == "none" || t.text == "None")
        return constant(Value::none(), t.offset);
      if (t.text == "varargs" || t.text == "kwargs" || t.text == "caller")
        for (Stmt *macro : macros_)
          (t.text == "varargs" ? macro->usesVarargs
                               : t.text == "kwargs" ? macro->usesKwargs : macro->usesCaller) = true;
      auto e = std::make_unique<Expr>(Expr::Kind::Name, t.offset);
      e->name = t.text;
      return e;
    }
    case TokenKind::String: {
      std::string text;
      while (current().kind == TokenKind::String)
        text += next().text; // adjacent literals join, as in Python
      return constant(Value::string(std::move(text)), t.offset);
    }
    case TokenKind::Integer:
      next();
      return constant(Value::integer(t.integer), t.offset);
    case TokenKind::Float:
      next();
      return constant(Value::real(t.real), t.offset);
    case TokenKind::Operator:
      if (t.text == "(") {
        next();
        ExprPtr e = parseTuple(false, true, {}, true);
        expectOp(")");
        return e;
      }
      if (t.text == "[")
        return parseList();
      if (t.text == "{")
        return parseDict();
      break;
    default:
      break;
    }
    fail("unexpected " + describe(t) + " where an expression should be", t.offset);
  }

  ExprPtr parseList() {
    auto e = std::make_unique<Expr>(Expr::Kind::List, next().offset);
    while (!isOp("]")) {
      if (!e->children.empty())
        expectOp(",");
      if (isOp("]"))
        break;
      e->children.push_back(parseExpression(true));
    }
    expectOp("]");
    return e;
  }

  ExprPtr parseDict() {
    auto e = std::make_unique<Expr>(Expr::Kind::Dict, next().offset);
    while (!isOp("}")) {
      if (!e->children.empty())
        expectOp(",");
      if (isOp("}"))
        break;
      e->children.push_back(parseExpression(true));
      expectOp(":");
      e->children.push_back(parseExpression(true));
    }
    expectOp("}");
    return e;
  }

  ExprPtr parsePostfix(ExprPtr node) {
    while (true) {
      if (isOp(".") || isOp("["))
        node = parseSubscript(std::move(node));
      else if (isOp("("))
        node = parseCall(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parseFilterExpr(ExprPtr node) {
    while (true) {
      if (isOp("|")) {
        node = parseFilter(std::move(node), false);
      } else if (isName("is")) {
        node = parseTest(std::move(node));
      } else if (isOp("(")) {
        node = parseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parseSubscript(ExprPtr node) {
    const Token &t = next();
    if (t.text == ".") {
      const Token &attr = next();
      if (attr.kind == TokenKind::Name) {
        auto e = std::make_unique<Expr>(Expr::Kind::Getattr, t.offset);
        e->name = attr.text;
        e->children.push_back(std::move(node));
        return e;
      }
      if (attr.kind != TokenKind::Integer)
        fail("expected a name or a number after '.', got " + describe(attr), attr.offset);
      auto e = std::make_unique<Expr>(Expr::Kind::Getitem, t.offset);
      e->children.push_back(std::move(node));
      e->children.push_back(constant(Value::integer(attr.integer), attr.offset));
      return e;
    }
    std::vector<ExprPtr> args;
    while (!isOp("]")) {
      if (!args.empty())
        expectOp(",");
      args.push_back(parseSubscribed());
    }
    expectOp("]");
    auto e = std::make_unique<Expr>(Expr::Kind::Getitem, t.offset);
    e->children.push_back(std::move(node));
    if (args.size() == 1) {
      e->children.push_back(std::move(args[0]));
    } else {
      auto tuple = std::make_unique<Expr>(Expr::Kind::Tuple, t.offset);
      tuple->children = std::move(args);
      e->children.push_back(std::move(tuple));
    }
    return e;
  }

  bool atSliceEnd() const { return isOp("]") || isOp(","); }

  ExprPtr parseSubscribed() {
    size_t offset = current().offset;
    auto slice = std::make_unique<Expr>(Expr::Kind::Slice, offset);
    if (isOp(":")) {
      next();
      slice->children.push_back(nullptr);
    } else {
      ExprPtr e = parseExpression(true);
      if (!isOp(":"))
        return e;
      next();
      slice->children.push_back(std::move(e));
    }
    if (isOp(":") || atSliceEnd())
      slice->children.push_back(nullptr);
    else
      slice->children.push_back(parseExpression(true));
    if (skipOp(":")) {
      if (atSliceEnd())
        slice->children.push_back(nullptr);
      else
        slice->children.push_back(parseExpression(true));
    } else {
      slice->children.push_back(nullptr);
    }
    return slice;
  }

  void parseCallArgs(Expr &call) {
    expectOp("(");
    bool requireComma = false;
    while (!isOp(")")) {
      if (requireComma) {
        expectOp(",");
        if (isOp(")"))
          break;
      }
      if (skipOp("*")) {
        call.starArgs = parseExpression(true);
      } else if (skipOp("**")) {
        call.starKwargs = parseExpression(true);
      } else if (current().kind == TokenKind::Name && look().kind == TokenKind::Operator &&
                 look().text == "=") {
        std::string key = next().text;
        next();
        call.keywords.emplace_back(std::move(key), parseExpression(true));
      } else {
        if (!call.keywords.empty() || call.starArgs || call.starKwargs)
          fail("a positional argument follows a keyword argument", current().offset);
        call.children.push_back(parseExpression(true));
      }
      requireComma = true;
    }
    expectOp(")");
  }

  ExprPtr parseCall(ExprPtr callee) {
    auto e = std::make_unique<Expr>(Expr::Kind::Call, current().offset);
    e->children.push_back(std::move(callee));
    parseCallArgs(*e);
    return e;
  }

  std::string dottedName() {
    std::string name = expectName().text;
    while (isOp(".")) {
      next();
      name += "." + expectName().text;
    }
    return name;
  }

  ExprPtr parseFilter(ExprPtr operand, bool startInline) {
    if (!startInline)
      next(); // '|'
    size_t offset = current().offset;
    std::string name = dottedName();
    if (!filterExists(name))
      fail("no filter named '" + name + "'", offset);
    auto e = std::make_unique<Expr>(Expr::Kind::Filter, offset);
    e->name = std::move(name);
    e->children.push_back(std::move(operand));
    if (isOp("("))
      parseCallArgs(*e);
    return e;
  }

  // `| f(args) | g` after `set x` or `filter`: each node's operand is null.
  std::vector<ExprPtr> parseFilterChain(bool startInline) {
    std::vector<ExprPtr> filters;
    while (isOp("|") || startInline) {
      filters.push_back(parseFilter(nullptr, startInline));
      startInline = false;
    }
    return filters;
  }

  ExprPtr parseTest(ExprPtr operand) {
    size_t offset = next().offset; // 'is'
    bool negated = skipName("not");
    size_t nameOffset = current().offset;
    std::string name = dottedName();
    if (!testExists(name))
      fail("no test named '" + name + "'", nameOffset);
    auto e = std::make_unique<Expr>(Expr::Kind::Test, offset);
    e->name = std::move(name);
    e->children.push_back(std::move(operand));
    const Token &t = current();
    bool argStart = t.kind == TokenKind::Name || t.kind == TokenKind::String ||
                    t.kind == TokenKind::Integer || t.kind == TokenKind::Float ||
                    (t.kind == TokenKind::Operator && (t.text == "[" || t.text == "{"));
    if (isOp("(")) {
      parseCallArgs(*e);
    } else if (argStart && !isName("else") && !isName("or") && !isName("and")) {
      if (isName("is"))
        fail("you cannot chain multiple tests with 'is'", t.offset);
      e->children.push_back(parsePostfix(parsePrimary()));
    }
    if (!negated)
      return e;
    auto notExpr = std::make_unique<Expr>(Expr::Kind::Not, offset);
    notExpr->children.push_back(std::move(e));
    return notExpr;
  }
};

} // namespace

Body parseTemplate(const std::vector<Token> &tokens) { return Parser(tokens).parseAll(); }

} // namespace llmc::chat
